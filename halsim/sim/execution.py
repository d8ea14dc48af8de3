"""An operation's body in virtual time, shared by every personality.

:func:`timed_body` is a generator: it yields durations (ns) for the caller to wait — a SimPy timeout
on an asynchronous queue, a virtual sleep of the calling host thread on ``sim:sync`` — and applies
the effects with the reference engine (``reference.hal.queue_op``), so buffer contents, host-call
results and failures are exactly those of the reference drivers. Commands run one after another,
each traced with its virtual start and end; the list costs one simulator event (its effects are
applied when it starts, which only a reader racing with the op could observe).
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

import functools
from typing import Callable, Generator

from reference.hal import HalError, Range, StatusCode
from reference.hal.command_buffer import Commands
from reference.hal.queue_op import QueueOp, run_body, run_command


def timed_body(device, op: QueueOp, track: int, at: int | None = None) -> Generator[int, None, bool]:
    """Yield the durations of the op's body and apply its effects; return ``should_signal``.

    ``at``: when the body starts, if later than now (the first duration yielded includes the gap —
    a queue's launch latency folded into the body's one timeout)."""
    cost = device.cost
    clock = device.now
    begin = clock()
    lead = 0 if at is None else max(0, at - begin)
    faults = device.faults
    if op.kind in ("alloca", "dealloca", "host_call"):
        ns = cost.op_ns(op.kind) + lead
        if ns:
            yield ns
        if faults is not None:
            faults.check(device, op, None)
        if op.kind != "host_call":
            error = None
            try:
                return run_body(device, op, track, clock)
            except HalError:
                raise
            except Exception as e:  # noqa: BLE001 - e.g. MemoryError committing a huge transient
                error = internal_error(e)
            raise error  # (outside the handler: the error keeps no traceback of this frame's callers)
        previous, device._host_call_op = device._host_call_op, op
        try:
            return run_body(device, op, track, clock)
        finally:
            device._host_call_op = previous
            device.threads.user_code_ran()
    # One duration for the whole command list (one simulator event per op, not per command): each
    # command's duration is computed in order, from the state the commands before it left (an
    # indirect dispatch reads counts an earlier command wrote), and each is traced with its own
    # start and end. Effects are applied when the list starts; only a racing reader could tell.
    start = t = begin + lead
    timeline = []
    error = None
    if faults is not None and not op.commands:
        faults.check(device, op, None)
    plan = command_plan(device, op.commands)
    block = getattr(plan, "block", None)
    if block is not None and faults is None:
        try:
            for _cmd, _ns, apply, _template in plan:
                apply()
        except Exception:  # noqa: BLE001 - a HalError or a Python error
            pass  # undo nothing (effects are idempotent writes); the loop below finds and traces the failure
        else:
            if block[1] + lead:
                yield block[1] + lead
            device.trace.emit_block(block[0], start, op.id, track)
            return True
    for cmd, ns, apply, template in plan:
        try:
            if ns is None:
                ns = cost.command_ns(cmd)
            if faults is not None:
                faults.check(device, op, cmd.index)
            apply()
        except Exception as e:  # noqa: BLE001 - a HalError, or a Python error: the command fails INTERNAL
            error = e if isinstance(e, HalError) else internal_error(e)
            ns = ns or 0
            timeline.append((template, t, t + ns, error))
            t += ns
            break
        timeline.append((template, t, t + ns, None))
        t += ns
    if t > begin:
        yield t - begin
    command_from = device.recorder.command_from
    for template, begin, end, e in timeline:
        command_from(template, op, begin, end, track, e)
    if error is not None:
        raise error
    return True


_HOST_SIDE = ("alloca", "dealloca", "host_call")


def internal_error(e: BaseException) -> HalError:
    """The failure of an operation whose execution raised a Python error (not a HalError: a kernel or
    model bug, a MemoryError...): INTERNAL "simulator: …", which fails the op's signals as a device
    error would — never an exception escaping from the simulator into a host wait."""
    return HalError(StatusCode.INTERNAL, f"simulator: {type(e).__name__}: {e}")


def quick_body(device, op: QueueOp, lead: int) -> tuple[int, tuple | None] | None:
    """:func:`timed_body` without a generator, for the common case: no fault injection, and a command
    list whose durations are all static (a block plan) or no commands at all. Applies the effects
    now and returns ``(ns, block)``: after ``ns`` (``lead`` included) the caller traces the block
    (``block``: the plan's ``(trace block id, ns, commands)``, or None) and the op signals.
    None: the op needs :func:`timed_body` (which then also finds and traces a failing command)."""
    if device.faults is not None or op.kind in _HOST_SIDE:
        return None
    commands = op.commands
    if not commands:
        return lead, None
    plan = getattr(commands, "device_state", None) or command_plan(device, commands)
    block = plan.block
    if block is None:
        return None
    try:
        plan.apply()
    except Exception:  # noqa: BLE001 - timed_body applies them again and reports the failure
        return None
    return block[1] + lead, block


# -- command plans: what a resolved command list costs and does, built once per list -----------------

_INLINE_FILL_MAX = 64 * 1024  # fills up to this size keep their expanded pattern in the plan


def command_plan(device, commands) -> tuple:
    """``(cmd, ns or None, apply, trace template)`` per command of a resolved list.

    ``ns`` is None where the duration depends on buffer contents (an indirect dispatch reads its
    workgroup counts when it runs). The plan is kept on the list (``Commands.device_state``), which
    ``CommandBuffer.resolve`` hands out again for a command buffer without indirect references, so a
    reusable command buffer is planned once. (A plan holds nothing the list does not already hold.)
    """
    if not commands:
        return ()
    plan = getattr(commands, "device_state", None)
    if plan is not None:
        return plan
    cost = device.cost
    template = device.recorder.command_template
    plan = Plan((cmd, _static_ns(cost, cmd), _applier(cmd), template(cmd)) for cmd in commands)
    if all(ns is not None for _, ns, _, _ in plan):
        # Every duration is known up front: the list's commands are traced as one block (offsets from
        # the list's start), one trace entry per run instead of one per command.
        offsets, t = [], 0
        for _, ns, _, tpl in plan:
            offsets.append((tpl, t, t + ns))
            t += ns
        plan.block = (device.trace.add_block(offsets), t, len(offsets))
        plan.apply = _apply_all([apply for _, _, apply, _ in plan], commands)
    if isinstance(commands, Commands):
        commands.device_state = plan
    return plan


class Plan(tuple):
    """A command list's plan; ``block`` = (trace block id, total ns, commands) when every duration is static,
    and then ``apply()`` applies every command's effect in order (stopping at a failure)."""

    def __new__(cls, items):
        self = super().__new__(cls, items)
        self.block = None
        self.apply = None
        return self


def _apply_all(appliers: list, commands) -> Callable[[], None]:
    """One call applying ``appliers`` in order. Fills of back-to-back byte ranges of one buffer (a
    command buffer filling a buffer piece by piece) become one slice assignment, which leaves the
    same bytes; a fill that would fail fails the merged one, which stops at the same point."""
    steps: list = []  # appliers, and [root, lo, hi, data] for runs of fills
    for cmd, apply in zip(commands, appliers):
        if apply is _nothing:
            continue
        run = getattr(apply, "fill_range", None)
        if run is not None:
            root, lo, hi, data = run
            last = steps[-1] if steps else None
            if type(last) is list and last[0] is root and last[2] == lo:
                last[2], last[3] = hi, last[3] + data
                continue
            steps.append([root, lo, hi, data])
            continue
        steps.append(apply)
    if all(type(step) is list for step in steps):
        fills = [tuple(step) for step in steps]

        def apply_fills() -> None:
            for root, lo, hi, data in fills:
                root.storage("fill target")[lo:hi] = data
        return apply_fills
    calls = [_fill_call(*step) if type(step) is list else step for step in steps]

    def apply_all() -> None:
        for call in calls:
            call()
    return apply_all


def _fill_call(root, lo, hi, data) -> Callable[[], None]:
    def fill() -> None:
        root.storage("fill target")[lo:hi] = data
    return fill


def _static_ns(cost, cmd) -> int | None:
    if cmd.kind == "dispatch" and isinstance(cmd.args[1], Range):
        return None
    return cost.command_ns(cmd)


def _applier(cmd) -> Callable[[], None]:
    if cmd.kind == "fill":
        target = cmd.accesses[0][0]
        n = target.length
        if n <= _INLINE_FILL_MAX:
            data = cmd.args * (n // len(cmd.args))
            root, lo, hi = target.buffer, target.offset, target.offset + n

            def fill() -> None:
                root.storage("fill target")[lo:hi] = data
            fill.fill_range = (root, lo, hi, data)  # for _apply_all
            return fill
    elif cmd.kind in ("barrier", "signal_event", "reset_event", "wait_events"):
        return _nothing
    return functools.partial(run_command, cmd)


def _nothing() -> None:
    pass


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
