"""The demo's built-in pipeline and a plain-text trace summary.

The pipeline is an ordinary host program: it runs unchanged on any device URI.

>>> from reference import hal
>>> with hal.create_device("local-task") as dev:
...     demo_pipeline(dev)
True
"""

from __future__ import annotations

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

    if "async_queue" in dev.capabilities:
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
