"""Run a :class:`~.program.Program` on IREE's own runtime (the oracle) or on one of our devices.

Both runners do the same thing in the same order: create the semaphores and buffers (initial bytes
written through a host mapping), execute every step, recording the status of each queue call, host
signal/fail and host wait, then query every semaphore and read every buffer back through a mapping.

IREE (``iree.runtime``, local-task only — its local-sync blocks while holding the GIL) is driven through
its Python API, whose reach decides how each step is expressed there:

* ``HalSemaphore.fail(message)`` always fails with ``UNKNOWN``, so programs fail semaphores with that code;
* ``queue_execute`` takes exactly one command buffer (``None`` is refused): a barrier is an empty one;
* ``HalCommandBuffer`` records ``fill`` and ``copy`` only: an ``update`` is recorded as a copy from a
  staging buffer written when the command is recorded (the same capture-at-record semantics);
* ``queue_copy`` copies the whole source to offset 0 of the target (so does the language's QueueCopy);
* ``queue_alloca(size, waits, signals)`` uses the device's default pool.

Ours gets the full contract: fill/update/copy commands in a command buffer, or (``Execute.direct``) the
queue_fill / queue_update / queue_copy shortcuts; the host bytes given to update are overwritten right
after the call returns, so an update that did not capture its source at record/submit time shows up.

A queue_alloca whose call raises returns no buffer; later steps that name it (which then fail too,
since they wait on the alloca) get a plain stand-in buffer of the same size.

Every run happens on a helper thread joined with a time bound: a hang fails the test, never CI.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field

import numpy as np

from .program import (
    OK,
    TIMEOUT,
    Alloca,
    Barrier,
    Copy,
    Dealloca,
    Execute,
    Fill,
    HostFail,
    HostSignal,
    HostWait,
    Program,
    QueueCopy,
    Status,
    WAIT,
)

RUN_BOUND = 120.0  # seconds for a whole program run


@dataclass
class Outcome:
    device: str
    submits: dict = field(default_factory=dict)  # step -> Status of the call (queue ops, host signal/fail)
    waits: dict = field(default_factory=dict)  # HostWait step -> Status
    finals: list = field(default_factory=list)  # per semaphore: int value or failure Status
    buffers: list = field(default_factory=list)  # final bytes per buffer

    def pretty(self) -> str:
        lines = [f"[{self.device}]"]
        lines.append("  calls: " + ", ".join(f"{k}:{v}" for k, v in sorted(self.submits.items()) if v != OK))
        lines.append("  waits: " + ", ".join(f"{k}:{v}" for k, v in sorted(self.waits.items())))
        lines.append("  semaphores: " + ", ".join(f"s{i}={v}" for i, v in enumerate(self.finals)))
        lines += [f"  b{i}: {b.hex()}" for i, b in enumerate(self.buffers)]
        return "\n".join(lines)


def bounded(fn, *args, bound: float = RUN_BOUND):
    """Run ``fn(*args)`` on a daemon thread; raise AssertionError if it does not finish in ``bound`` s."""
    box = {}

    def target():
        try:
            box["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = e

    t = threading.Thread(target=target, name=f"differential {getattr(fn, '__name__', fn)}", daemon=True)
    t.start()
    t.join(bound)
    if t.is_alive():
        raise AssertionError(f"{getattr(fn, '__name__', fn)} did not finish within {bound} s (hang)")
    if "error" in box:
        raise box["error"]
    return box["value"]


def _timeouts(program: Program, timeouts):
    return {i: (timeouts or {}).get(i, WAIT) for i, st in enumerate(program.steps) if isinstance(st, HostWait)}


# -- IREE ----------------------------------------------------------------------------------------------

_IREE = {}
_IREE_STATUS = re.compile(r":\d+: ([A-Z_]+); (.*)\Z", re.S)


def iree_device():
    """IREE's local-task device (one per process, as iree.runtime caches it)."""
    if "device" not in _IREE:
        import iree.runtime as rt

        _IREE["rt"] = rt
        _IREE["device"] = rt.get_device("local-task")
    return _IREE["device"]


def iree_status(exc: BaseException) -> Status:
    """The status in an IREE exception: 'context: file.cc:123: CODE; message'."""
    m = _IREE_STATUS.search(str(exc))
    if m:
        return Status(m.group(1), m.group(2))
    return Status("EXCEPTION", f"{type(exc).__name__}: {exc}")


def _iree_buffer(size: int, data: bytes | None = None):
    rt = _IREE["rt"]
    buf = iree_device().allocator.allocate_buffer(
        memory_type=rt.MemoryType.DEVICE_LOCAL | rt.MemoryType.HOST_VISIBLE,
        allowed_usage=rt.BufferUsage.DEFAULT | rt.BufferUsage.MAPPING, allocation_size=size)
    if data is not None:
        buf.map().asarray((size,), np.dtype(np.uint8))[:] = np.frombuffer(data, np.uint8)
    return buf


def _iree_read(buf) -> bytes:
    return bytes(buf.map().asarray((buf.byte_length(),), np.dtype(np.uint8)))


_NP_PATTERN = {1: np.uint8, 2: np.uint16, 4: np.uint32}


def run_iree(program: Program, timeouts=None) -> Outcome:
    return bounded(_run_iree, program, _timeouts(program, timeouts))


def _run_iree(program: Program, timeouts) -> Outcome:
    d = iree_device()
    rt = _IREE["rt"]
    out = Outcome("iree local-task")
    sems = [d.create_semaphore(v) for v in program.semaphores]
    bufs = {f"b{i}": _iree_buffer(len(b), b) for i, b in enumerate(program.buffers)}
    keep = []  # command buffers and staging buffers stay referenced until the end

    def tps(lst):
        return [(sems[s], v) for s, v in lst]

    for i, st in enumerate(program.steps):
        try:
            if isinstance(st, HostSignal):
                sems[st.sem].signal(st.value)
            elif isinstance(st, HostFail):
                sems[st.sem].fail(st.message)
            elif isinstance(st, HostWait):
                ok = sems[st.sem].wait(st.value, timeout=int(timeouts[i] * 1e9))
                out.waits[i] = OK if ok else TIMEOUT
                continue
            elif isinstance(st, (Execute, Barrier)):
                cb = rt.HalCommandBuffer(d)
                for c in getattr(st, "commands", ()):
                    if isinstance(c, Fill):
                        cb.fill(bufs[c.target], _NP_PATTERN[c.pattern_length](c.pattern),
                                target_offset=c.offset, length=c.length)
                    elif isinstance(c, Copy):
                        cb.copy(bufs[c.source], bufs[c.target], source_offset=c.source_offset,
                                target_offset=c.target_offset, length=c.length)
                    else:
                        staging = _iree_buffer(len(c.data), c.data)
                        keep.append(staging)
                        cb.copy(staging, bufs[c.target], source_offset=0, target_offset=c.offset,
                                length=len(c.data))
                cb.end()
                keep.append(cb)
                d.queue_execute(cb, tps(st.wait), tps(st.signal))
            elif isinstance(st, QueueCopy):
                d.queue_copy(bufs[st.source], bufs[st.target], tps(st.wait), tps(st.signal))
            elif isinstance(st, Alloca):
                try:
                    bufs[st.transient] = d.queue_alloca(st.size, tps(st.wait), tps(st.signal))
                except Exception:
                    bufs[st.transient] = _iree_buffer(st.size)  # stand-in: its users fail as well
                    raise
            elif isinstance(st, Dealloca):
                d.queue_dealloca(bufs[st.transient], tps(st.wait), tps(st.signal))
            else:
                raise TypeError(f"unknown step {st!r}")
            out.submits[i] = OK
        except Exception as e:  # noqa: BLE001 - every status is data here
            (out.waits if isinstance(st, HostWait) else out.submits)[i] = iree_status(e)
    for s in sems:
        try:
            out.finals.append(s.query())
        except Exception as e:  # noqa: BLE001
            out.finals.append(iree_status(e))
    out.buffers = [_iree_read(bufs[f"b{i}"]) for i in range(len(program.buffers))]
    return out


# -- ours ------------------------------------------------------------------------------------------------


def run_ours(program: Program, uri: str = "local-task", timeouts=None) -> Outcome:
    return bounded(_run_ours, program, uri, _timeouts(program, timeouts))


def _run_ours(program: Program, uri: str, timeouts) -> Outcome:
    from reference import hal

    out = Outcome(f"ours {uri}")
    dev = hal.create_device(uri)
    try:
        sems = [dev.create_semaphore(v) for v in program.semaphores]
        bufs = {}
        for i, data in enumerate(program.buffers):
            b = dev.allocator.allocate_buffer(len(data))
            b.map_write(0, data)
            bufs[f"b{i}"] = b

        def tps(lst):
            return [(sems[s], v) for s, v in lst]

        for i, st in enumerate(program.steps):
            scribble = []  # host bytes handed to update: overwritten once the call returns
            try:
                if isinstance(st, HostSignal):
                    sems[st.sem].signal(st.value)
                elif isinstance(st, HostFail):
                    sems[st.sem].fail(hal.StatusCode.UNKNOWN, st.message)
                elif isinstance(st, HostWait):
                    sems[st.sem].wait(st.value, timeout=timeouts[i])
                    out.waits[i] = OK
                    continue
                elif isinstance(st, Barrier):
                    dev.queue_barrier(tps(st.wait), tps(st.signal))
                elif isinstance(st, Execute) and st.direct:
                    (c,) = st.commands
                    if isinstance(c, Fill):
                        dev.queue_fill(tps(st.wait), tps(st.signal), bufs[c.target], c.offset, c.length,
                                       c.pattern, c.pattern_length)
                    elif isinstance(c, Copy):
                        dev.queue_copy(tps(st.wait), tps(st.signal), bufs[c.source], c.source_offset,
                                       bufs[c.target], c.target_offset, c.length)
                    else:
                        src = bytearray(c.data)
                        scribble.append(src)
                        dev.queue_update(tps(st.wait), tps(st.signal), src, 0, bufs[c.target], c.offset,
                                         len(c.data))
                elif isinstance(st, Execute):
                    cb = dev.create_command_buffer()
                    cb.begin()
                    for c in st.commands:
                        if isinstance(c, Fill):
                            cb.fill_buffer(hal.BufferRef(bufs[c.target], c.offset, c.length), c.pattern,
                                           c.pattern_length)
                        elif isinstance(c, Copy):
                            cb.copy_buffer(hal.BufferRef(bufs[c.source], c.source_offset, c.length),
                                           hal.BufferRef(bufs[c.target], c.target_offset, c.length))
                        else:
                            src = bytearray(c.data)
                            scribble.append(src)
                            cb.update_buffer(src, 0, hal.BufferRef(bufs[c.target], c.offset, len(c.data)))
                    cb.end()
                    dev.queue_execute(tps(st.wait), tps(st.signal), cb)
                elif isinstance(st, QueueCopy):
                    src = bufs[st.source]
                    dev.queue_copy(tps(st.wait), tps(st.signal), src, 0, bufs[st.target], 0, src.byte_length)
                elif isinstance(st, Alloca):
                    try:
                        bufs[st.transient] = dev.queue_alloca(tps(st.wait), tps(st.signal), st.size)
                    except hal.HalError:
                        bufs[st.transient] = dev.allocator.allocate_buffer(st.size)  # stand-in
                        raise
                elif isinstance(st, Dealloca):
                    dev.queue_dealloca(tps(st.wait), tps(st.signal), bufs[st.transient])
                else:
                    raise TypeError(f"unknown step {st!r}")
                out.submits[i] = OK
            except hal.HalError as e:
                if isinstance(st, HostWait):
                    # IREE's wait says only "timed out" (False): compare the code alone.
                    out.waits[i] = TIMEOUT if e.code == hal.StatusCode.DEADLINE_EXCEEDED else \
                        Status(e.code.name, e.message)
                else:
                    out.submits[i] = Status(e.code.name, e.message)
            finally:
                for src in scribble:
                    src[:] = b"\xee" * len(src)
        for s in sems:
            try:
                out.finals.append(s.query())
            except hal.HalError as e:
                out.finals.append(Status(e.code.name, e.message))
        out.buffers = [bufs[f"b{i}"].map_read() for i in range(len(program.buffers))]
    finally:
        dev.close()
    return out
