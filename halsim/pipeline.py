"""The demo's built-in pipelines and a plain-text trace summary.

Both pipelines are ordinary host programs: they run unchanged on any device URI.
:func:`staged_pipeline` is the one ``halsim demo`` runs on ``sim:metal`` (async and ``legacy_sync``):
two queues, stages chained by cross-queue waits. :func:`demo_pipeline` is the single-queue one
``halsim demo --device URI`` runs and summarizes.

>>> from reference import hal
>>> with hal.create_device("local-task") as dev:
...     demo_pipeline(dev)
True
>>> with hal.create_device("sim:metal?queues=2") as dev:
...     staged_pipeline(dev, stages=3)
True
"""

from __future__ import annotations

import os

import numpy as np

from reference import hal

N = 4096  # int32 elements per stage


def demo_pipeline(dev, stages: int = 3) -> bool:
    """Upload → per stage (scale_and_offset, barrier, negate) → copy out → host call, chained by
    semaphores and submitted consumer-first (wait-before-signal), released by one host signal."""
    exe = dev.load_executable()
    nbytes = N * 4
    data = np.arange(N, dtype=np.int32)
    bufs = [dev.allocator.allocate_buffer(nbytes) for _ in range(stages + 1)]
    scratch = dev.allocator.allocate_buffer(nbytes)
    result = dev.allocator.allocate_buffer(nbytes)
    gate = dev.create_semaphore()
    timeline = dev.create_semaphore()  # value k: stage k done (0 = upload)
    done = dev.create_semaphore()
    calls = []

    submissions = [  # consumer first: each waits on the timeline value the next one signals
        lambda: dev.queue_host_call([(timeline, stages + 2)], [(done, 1)],
                                    lambda args, ctx: calls.append(args), args=(stages,)),
        lambda: dev.queue_copy([(timeline, stages + 1)], [(timeline, stages + 2)], bufs[stages], 0, result, 0,
                               nbytes),
    ]
    for k in range(stages, 0, -1):
        cb = dev.create_command_buffer(categories=hal.CommandCategory.DISPATCH)
        cb.begin()
        cb.dispatch(exe, "scale_and_offset", (N // 64, 1, 1), (3, 10), (bufs[k - 1], scratch))
        cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.DISPATCH, [(0, 0)])
        cb.dispatch(exe, "negate", (N // 64, 1, 1), (), (scratch, bufs[k]))
        cb.end()
        submissions.append(lambda cb=cb, k=k: dev.queue_execute([(timeline, k)], [(timeline, k + 1)], cb))
    submissions.append(lambda: dev.queue_update([(gate, 1)], [(timeline, 1)], data.tobytes(), 0, bufs[0], 0, nbytes))

    # Devices that encode waits on an in-order queue (Metal's encodeWaitForEvent, OpenCL wait lists)
    # stall that queue on a consumer submitted before its producer: submit producers first there too.
    if "async_queue" in dev.capabilities and not getattr(dev, "in_order_waits", False):
        # Every queue call returns before its waits are met; one host signal releases the pipeline.
        for submit in submissions:
            submit()
        gate.signal(1)
    else:
        # A synchronous device blocks each queue call until its waits are met: producers first.
        gate.signal(1)
        for submit in reversed(submissions):
            submit()
    done.wait(1, timeout=30)

    expected = data.copy()
    for _ in range(stages):
        expected = -(expected * 3 + 10)
    got = np.frombuffer(result.map_read(), np.int32)
    return calls == [(stages,)] and bool(np.array_equal(got, expected))


def staged_pipeline(dev, stages: int = 6, n: int = 16384) -> bool:
    """A software-pipelined stream of ``stages`` chunks over two queues, chained by cross-queue waits.

    Queue 1 (transfer) zero-fills the result, then per stage k uploads chunk k into input buffer k%2
    (``queue_update``) and later copies output k%2 into the result (``queue_copy``); queue 0 (compute)
    runs one command buffer per stage: ``scale_and_offset`` (×3 + 10), a memory barrier, ``negate``,
    an execution barrier and a one-byte ``fill`` of the stage's done flag (a blit after compute: an
    encoder switch on Metal). Double buffering: upload k waits until compute k-2 has read its input,
    compute k waits for upload k, for compute k-1 (they share the scratch buffer) and for copy k-2 to
    have read its output; uploads wait for the previous upload, copies for the previous copy and the
    zero fill, so the program is race-free even where queues do not order submissions (``halsim check``
    finds nothing on any device). Upload k+1 is submitted
    before copy k, so on an in-order queue the next upload does not wait behind the previous copy.
    Every wait is on a value an earlier submission signals, so producers come first and the program
    also runs where queue calls block (``legacy_sync``, ``local-sync``). Needs ``dev.queue_count >= 2``
    on devices that have queues (one queue serves both roles otherwise). Returns whether the result is
    right."""
    compute_q, transfer_q = 1 << 0, (1 << 1) if getattr(dev, "queue_count", 1) >= 2 else 1 << 0
    exe = dev.load_executable()
    nbytes = n * 4
    ins = [dev.allocator.allocate_buffer(nbytes) for _ in range(2)]
    outs = [dev.allocator.allocate_buffer(nbytes) for _ in range(2)]
    tmp = dev.allocator.allocate_buffer(nbytes)
    result = dev.allocator.allocate_buffer(nbytes * stages)
    flags = dev.allocator.allocate_buffer(4 * stages)
    uploaded, computed, downloaded = dev.create_semaphore(), dev.create_semaphore(), dev.create_semaphore()
    zeroed = dev.create_semaphore()
    chunks = [np.arange(k * n, (k + 1) * n, dtype=np.int32) for k in range(stages)]

    def after(sem, value):
        return [(sem, value)] if value > 0 else []

    # Every signal of one timeline semaphore is ordered after the one before it (uploads after uploads,
    # downloads after downloads), and every write of `result` after the zero fill: on a device whose
    # queues do not order submissions (`sim`, `local-task`) nothing else would (halsim check).
    def upload(k):
        dev.queue_update(after(computed, k - 1) + after(uploaded, k), [(uploaded, k + 1)], chunks[k].tobytes(),
                         0, ins[k % 2], 0, nbytes, queue_affinity=transfer_q)

    def compute(k):
        cb = dev.create_command_buffer(categories=hal.CommandCategory.ANY)
        cb.begin()
        cb.dispatch(exe, "scale_and_offset", (n // 64, 1, 1), (3, 10), (ins[k % 2], tmp))
        cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.DISPATCH,
                             [(hal.AccessScope.DISPATCH_WRITE, hal.AccessScope.DISPATCH_READ)])
        cb.dispatch(exe, "negate", (n // 64, 1, 1), (), (tmp, outs[k % 2]))
        cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.TRANSFER)
        cb.fill_buffer(hal.BufferRef(flags, 4 * k, 4), k + 1, 1)
        cb.end()
        # after(computed, k): stage k reuses tmp and signals `computed` after stage k-1 — without it the
        # two computes race on an out-of-order device (WAR/WAW on tmp, and a non-increasing signal).
        dev.queue_execute([(uploaded, k + 1)] + after(downloaded, k - 1) + after(computed, k), [(computed, k + 1)],
                          cb, queue_affinity=compute_q)

    def download(k):
        dev.queue_copy([(computed, k + 1), (zeroed, 1)] + after(downloaded, k), [(downloaded, k + 1)],
                       outs[k % 2], 0, result, k * nbytes, nbytes, queue_affinity=transfer_q)

    dev.queue_fill([], [(zeroed, 1)], result, 0, nbytes * stages, 0, 1, queue_affinity=transfer_q)
    upload(0)
    for k in range(stages):
        if k + 1 < stages:
            upload(k + 1)
        compute(k)
        download(k)
    downloaded.wait(stages, timeout=60)

    expected = -(np.arange(n * stages, dtype=np.int64) * 3 + 10)
    got = np.frombuffer(result.map_read(), np.int32)
    marks = flags.map_read()
    return bool(np.array_equal(got, expected)) and marks == bytes(k + 1 for k in range(stages) for _ in range(4))


METAL_MODES = (("async", "sim:metal?queues=2"), ("legacy_sync", "sim:metal?queues=2&legacy_sync=1"))


def metal_demo(out_dir: str, stages: int = 6) -> tuple[bool, str]:
    """Run :func:`staged_pipeline` on ``sim:metal`` async and ``legacy_sync``, write both traces to
    ``out_dir`` and return ``(outputs right in both modes, the report to print)``."""
    rows, ok = [], True
    for mode, uri in METAL_MODES:
        with hal.create_device(uri) as dev:
            ok = staged_pipeline(dev, stages) and ok
            path = os.path.join(out_dir, f"sim_metal.{mode}.trace.json")
            dev.trace.save(path)
            rows.append((mode, makespan(dev.trace), dev.now(), len(dev.trace.operations()), path))
    ratio = rows[1][1] / rows[0][1]
    lines = [f"halsim demo: a {stages}-stage pipeline on sim:metal, 2 queues (0 compute, 1 transfer), "
             "stages chained by cross-queue waits",
             "  mode          makespan   host done  ops  trace"]
    lines += [f"  {mode:<12} {span / 1e3:>7.1f} us {done / 1e3:>7.1f} us {n:>4}  {path}"
              for mode, span, done, n, path in rows]
    lines += [f"  legacy_sync / async makespan: {ratio:.2f}x",
              "  async:       a queue call commits a wait command buffer (the GPU waits on the shared events), "
              "then the work",
              "  legacy_sync: a queue call blocks the host until its waits are met (seen through the event "
              "listener), then commits",
              f"output check: {'OK' if ok else 'MISMATCH'} (both modes)"]
    return ok, "\n".join(lines)


def makespan(trace) -> int:
    """Nanoseconds from the first queue operation's enqueue to the last one's completion."""
    ops = trace.operations()
    ends = [op["end"] for op in ops if "end" in op]
    return (max(ends) - min(op["t"] for op in ops)) if ends else 0


def summarize(trace, title: str = "trace") -> str:
    """A plain-text summary: operations by kind, makespan, and each operation's timing and status."""
    ops = trace.operations()
    if not ops:
        return f"{title}: no queue operations"
    t0 = min(op["t"] for op in ops)
    ends = [op["end"] for op in ops if "end" in op]
    makespan = (max(ends) - t0) if ends else 0
    kinds: dict[str, int] = {}
    for op in ops:
        kinds[op["kind"]] = kinds.get(op["kind"], 0) + 1
    lines = [
        f"{title} ({trace.header.get('device')}, clock {trace.header.get('clock')})",
        f"  operations: {len(ops)} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})",
        f"  makespan:   {makespan / 1e3:.1f} us (first enqueue to last completion)",
        "  op      kind        waits on            signals             start(us)  dur(us)  status",
    ]
    for op in ops[:40]:
        waits = ",".join(f"{s}>={v}" for s, v in op["wait"]) or "-"
        sigs = ",".join(f"{s}={v}" for s, v in op["signal"]) or "-"
        if "end" in op:
            start = (op["start"] - t0) / 1e3
            dur = (op["end"] - op["start"]) / 1e3
            status = hal.StatusCode(op["status"]).name
            lines.append(f"  {op['op']:<7} {op['kind']:<11} {waits:<19} {sigs:<19} {start:>9.1f} {dur:>8.1f}  {status}")
        else:
            lines.append(f"  {op['op']:<7} {op['kind']:<11} {waits:<19} {sigs:<19} {'(never ran)':>18}")
    if len(ops) > 40:
        lines.append(f"  ... {len(ops) - 40} more")
    return "\n".join(lines)
