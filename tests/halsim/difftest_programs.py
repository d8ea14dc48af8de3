"""Programs for ``halsim difftest`` in CI: each takes a device, returns what it computed, and reads its
outputs back with ``map_read`` (which difftest compares device by device)."""

import numpy as np

from halsim.pipeline import staged_pipeline
from reference import hal

WAIT = 30


def pipeline(dev):
    """The two-queue staged pipeline (one queue where the device has one)."""
    return staged_pipeline(dev, stages=3, n=1024)


def fan_out_fan_in(dev):
    """One upload, four dispatches reading it (fan-out), one copy waiting on all four (fan-in)."""
    exe = dev.load_executable()
    n = 256
    src = dev.allocator.allocate_buffer(4 * n)
    outs = [dev.allocator.allocate_buffer(4 * n) for _ in range(4)]
    gather = dev.allocator.allocate_buffer(16 * n)
    up, done = dev.create_semaphore(), dev.create_semaphore()
    parts = [dev.create_semaphore() for _ in outs]
    dev.queue_update([], [(up, 1)], np.arange(n, dtype=np.int32).tobytes(), 0, src, 0, 4 * n)
    for k, (out, part) in enumerate(zip(outs, parts)):
        dev.queue_dispatch([(up, 1)], [(part, 1)], exe, "scale_and_offset", (n // 64, 1, 1), (k + 2, k), (src, out))
    cb = dev.create_command_buffer()
    cb.begin()
    for k, out in enumerate(outs):
        cb.copy_buffer(hal.BufferRef(out, 0, 4 * n), hal.BufferRef(gather, 4 * n * k, 4 * n))
    cb.end()
    dev.queue_execute([(p, 1) for p in parts], [(done, 1)], cb)
    done.wait(1, timeout=WAIT)
    return gather.map_read()


def host_round_trips(dev):
    """Five rounds of: device increments a counter buffer, host waits, reads it, and writes the next input."""
    exe = dev.load_executable()
    a, b = dev.allocator.allocate_buffer(64), dev.allocator.allocate_buffer(64)
    step = dev.create_semaphore()
    values = []
    a.map_write(0, np.full(16, 1, np.int32).tobytes())
    for i in range(1, 6):
        dev.queue_dispatch([], [(step, i)], exe, "scale_and_offset", (1, 1, 1), (2, i), (a, b))
        step.wait(i, timeout=WAIT)
        got = np.frombuffer(b.map_read(0, 16), np.int32)
        values.append(int(got[0]))
        a.map_write(0, np.full(16, got[0], np.int32).tobytes())
    return values


def failure_propagates(dev):
    """A failed semaphore fails the op waiting on it; the buffer that op would have filled is untouched."""
    buf = dev.allocator.allocate_buffer(32)
    gate, done = dev.create_semaphore(), dev.create_semaphore()
    dev.queue_fill([(gate, 1)], [(done, 1)], buf, 0, 32, 0xEE, 1)
    gate.fail(hal.StatusCode.DATA_LOSS, "upstream lost")
    try:
        done.wait(1, timeout=WAIT)
        outcome = "signaled"
    except hal.HalError as e:
        outcome = e.code.name
    return outcome, buf.map_read()


def host_side_ops(dev):
    """Barriers, a host call, an alloca and a dealloca between device work, waits before signals:
    ops without timed device work (traced when the device reached them) and a host call whose
    function must run before what waits for it (it writes the buffer a copy then reads)."""
    src, dst = dev.allocator.allocate_buffer(64), dev.allocator.allocate_buffer(64)
    gate, a, b, c, d = (dev.create_semaphore() for _ in range(5))

    def fn(args, context):
        src.map_write(0, bytes(range(64)))

    dev.queue_barrier([(gate, 1)], [(a, 1)])                     # waits for the host, below
    dev.queue_host_call([(a, 1)], [(b, 1)], fn)
    tmp = dev.queue_alloca([(b, 1)], [(c, 1)], 64)
    dev.queue_copy([(c, 1)], [(c, 2)], src, 0, tmp, 0, 64)
    dev.queue_copy([(c, 2)], [(c, 3)], tmp, 0, dst, 0, 64)
    dev.queue_dealloca([(c, 3)], [(d, 1)], tmp)
    dev.queue_barrier([(d, 1)], [(d, 2)])
    gate.signal(1)
    d.wait(2, timeout=WAIT)
    return dst.map_read()


PROGRAMS = [pipeline, fan_out_fan_in, host_round_trips, failure_propagates, host_side_ops]
