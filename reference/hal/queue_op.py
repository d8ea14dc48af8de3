"""Queue operations: what a queue call becomes once validated, and how one executes.

A :class:`QueueOp` holds copies of the wait and signal lists, the resolved commands (binding tables
already applied), and everything it references (retained until it retires — HAL_SEMANTICS Q5.3, Q15).
Drivers decide *when* an op runs; :func:`run_body` and :func:`retire` say *what* running means, the
same on every device: the body's effects on buffers, host-call results (OK / DEFERRED / error), and
signalling or failing the signal list.
"""

from __future__ import annotations

import struct
from typing import Callable, NamedTuple

from ..kernels import run_kernel
from .buffer import Range
from .command_buffer import Cmd
from .host_call_context import running
from .status import HalError, StatusCode


class HostCallContext(NamedTuple):
    """What a host call receives as ``context``: ``signal`` is empty when ``non_blocking``."""

    device: object
    queue_affinity: int
    signal: tuple


class QueueOp:
    __slots__ = ("id", "kind", "queue", "thread", "wait", "signal", "commands", "buffer", "host_call",
                 "resources", "fields", "enqueue_t", "ready_t", "start_t", "end_t", "track", "wait_error",
                 "pending", "__weakref__")

    def __init__(self, op_id: str, kind: str, queue: int, thread: int, wait, signal,
                 commands: tuple[Cmd, ...] = (), buffer=None, host_call=None, resources=(), fields=None):
        self.id = op_id
        self.kind = kind
        self.queue = queue
        self.thread = thread
        self.wait = wait
        self.signal = signal
        self.commands = commands
        self.buffer = buffer
        self.host_call = host_call  # (fn, args, non_blocking)
        self.resources = resources
        self.fields = fields or {}
        self.enqueue_t = self.ready_t = self.start_t = self.end_t = None
        self.track = None
        self.wait_error: HalError | None = None
        self.pending = 0

    def __repr__(self) -> str:
        return f"<QueueOp {self.id} {self.kind}>"


#: How the refusal of a dealloca that ran before its storage was committed begins (the checks tell it
#: from a dealloca failed by a wait or the queue's sticky status: that one never ran).
DEALLOCA_TOO_EARLY = "queue_dealloca of buffer"


def run_command(cmd: Cmd) -> None:
    """Apply one resolved command to buffer memory (raises HalError, e.g. for decommitted buffers)."""
    kind = cmd.kind
    if kind == "fill":
        target = cmd.accesses[0][0]
        target.view("fill target")[:] = cmd.args * (target.length // len(cmd.args))
    elif kind == "update":
        cmd.accesses[0][0].view("update target")[:] = cmd.args
    elif kind == "copy":
        source, target = cmd.accesses[0][0], cmd.accesses[1][0]
        data = source.view("copy source")
        if source.buffer is target.buffer:
            data = bytes(data)  # overlap through indirect refs: copy via a snapshot
        target.view("copy target")[:] = data
    elif kind == "dispatch":
        spec, workgroups, constants, bindings = cmd.args
        if isinstance(workgroups, Range):
            workgroups = struct.unpack_from("<3I", workgroups.view("dispatch workgroups"))
            if 0 in workgroups:
                return
        run_kernel(spec, workgroups, constants, [b.view(f"{spec.name} binding") for b in bindings])
    # barriers and events: nothing to do when commands run one after another


def run_commands(device, op: QueueOp, track: int, clock: Callable[[], int]) -> None:
    """Run the op's commands in order, tracing each; the first error stops the op."""
    rec = device.recorder
    for cmd in op.commands:
        start = clock()
        try:
            run_command(cmd)
        except HalError as e:
            rec.command(op, cmd, start, clock(), track, e)
            raise
        rec.command(op, cmd, start, clock(), track)


def run_body(device, op: QueueOp, track: int, clock: Callable[[], int]) -> bool:
    """Execute the op's effect. Returns whether the queue should signal; raises HalError on failure."""
    kind = op.kind
    if kind == "alloca":
        op.buffer.commit(op.wait)  # (the waits matter where a device commits at issue, Buffer.commit)
        device.recorder.commit(op.buffer, op)
    elif kind == "dealloca":
        buf = op.buffer
        if buf.is_transient:
            state = buf.root._state
            if state != "committed":
                raise HalError(StatusCode.FAILED_PRECONDITION, f"{DEALLOCA_TOO_EARLY} {buf.id} that is {state}, "
                                                               "not committed")
            buf.decommit()
            device.recorder.decommit(buf, op)
    elif kind == "host_call":
        return _run_host_call(device, op)
    else:
        run_commands(device, op, track, clock)
    return True


def _run_host_call(device, op: QueueOp) -> bool:
    fn, args, non_blocking = op.host_call
    if non_blocking:
        # The queue signals first and the callback gets no signal list; its result is ignored.
        signal_all(device, op)
        try:
            with running(op.id):
                device._run_host_function(fn, args, HostCallContext(device, 1 << op.queue, ()))
        except Exception:  # noqa: BLE001 - a non-blocking callback's failure has nowhere to go
            pass
        return False
    try:
        with running(op.id):
            result = device._run_host_function(fn, args, HostCallContext(device, 1 << op.queue, op.signal))
    except HalError:
        raise
    except Exception as e:  # noqa: BLE001 - the signal semaphores carry the failure to waiters
        raise HalError(StatusCode.INTERNAL, f"host call raised {type(e).__name__}: {e}") from e
    if result is None or result == StatusCode.OK:
        return True
    if result == StatusCode.DEFERRED:
        device._host_call_deferred(op)
        return False
    if isinstance(result, HalError):
        raise result
    if isinstance(result, int) and not isinstance(result, bool):
        try:
            code = StatusCode(result)
        except ValueError:
            code = StatusCode.INTERNAL
        raise HalError(code, f"host call returned {code.name}")
    raise HalError(StatusCode.INTERNAL, f"host call returned {result!r}; expected None, a StatusCode or a HalError")


def signal_all(device, op: QueueOp) -> HalError | None:
    """Signal the op's list in order (IREE ``list_signal``). If one signal is refused (its value is not
    above the current one — another producer got there first — or its semaphore failed), the whole
    list fails with that error, which is returned: IREE follows a failed ``list_signal`` with
    ``list_fail`` of the same list (local-sync [H] ``queue_op_end``, local-task, CUDA/HIP completion,
    Metal [H] completed handler), so the refused semaphore and those already signaled fail too."""
    try:
        for sem, value in op.signal:
            device._signal_semaphore(sem, value, op.id)
    except HalError as e:
        fail_all(device, op, e)
        return e
    return None


def fail_all(device, op: QueueOp, error: HalError) -> None:
    for sem, _ in op.signal:
        device._fail_semaphore(sem, error, op.id)


def retire(device, op: QueueOp, error: HalError | None, should_signal: bool) -> HalError | None:
    """Release what the op retained (before signalling, so waiters may reuse it), then signal or fail.
    Returns the error a refused signal failed the list with (see :func:`signal_all`), else None."""
    if op.resources:
        device.recorder.release(op, [r.id for r in op.resources])
        op.resources = ()
    if error is not None:
        fail_all(device, op, error)
    elif should_signal:
        return signal_all(device, op)
    return None
