"""An operation's body in virtual time, shared by every personality.

:func:`timed_body` is a generator: it yields durations (ns) for the caller to wait — a SimPy timeout
on an asynchronous queue, a virtual sleep of the calling host thread on ``sim:sync`` — and applies
the effects with the reference engine (``reference.hal.queue_op``), so buffer contents, host-call
results and failures are exactly those of the reference drivers. Commands run one after another;
each command's effect lands when it ends, and each is traced with its virtual start and end.
Its return value (``StopIteration.value``) says whether the queue should signal; a failure raises.

>>> from halsim.sim.driver import driver
>>> from reference import hal
>>> dev = driver.create_device("generic", cost_model={"launch_ns": 0, "fill_latency_ns": 10,
...                                                   "fill_gb_per_s": 1, "submit_ns": 0, "host_api_ns": 0})
>>> buf, done = dev.allocator.allocate_buffer(16), dev.create_semaphore()
>>> dev.queue_fill([], [(done, 1)], buf, 0, 16, 0xAB, 1)
>>> done.wait(1)
>>> [(c["start"], c["t"]) for c in dev.trace.events("cmd")]   # 10 ns latency + 16 bytes at 1 byte/ns
[(0, 26)]
>>> dev.close()
"""

from __future__ import annotations

from typing import Generator

from reference.hal import HalError
from reference.hal.queue_op import QueueOp, run_body, run_command


def timed_body(device, op: QueueOp, track: int) -> Generator[int, None, bool]:
    """Yield the durations of the op's body and apply its effects; return ``should_signal``."""
    cost = device.cost
    clock = device.now
    if op.kind in ("alloca", "dealloca", "host_call"):
        ns = cost.op_ns(op.kind)
        if ns:
            yield ns
        if op.kind != "host_call":
            return run_body(device, op, track, clock)
        previous, device._host_call_op = device._host_call_op, op
        try:
            return run_body(device, op, track, clock)
        finally:
            device._host_call_op = previous
            device.threads.user_code_ran()
    rec = device.recorder
    for cmd in op.commands:
        start = clock()
        ns = cost.command_ns(cmd)
        if ns:
            yield ns
        try:
            run_command(cmd)
        except HalError as e:
            rec.command(op, cmd, start, clock(), track, e)
            raise
        rec.command(op, cmd, start, clock(), track)
    return True


def drive_body(body: Generator[int, None, bool], wait) -> tuple[bool, HalError | None]:
    """Run ``body`` to the end, calling ``wait(ns)`` for each duration (a blocking caller).

    Returns ``(should_signal, error)``."""
    try:
        ns = next(body)
        while True:
            wait(ns)
            ns = body.send(None)
    except StopIteration as stop:
        return bool(stop.value), None
    except HalError as e:
        return False, e
