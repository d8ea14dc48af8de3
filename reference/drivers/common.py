"""Machinery shared by the reference drivers: running a ready op on the calling thread and tracing it."""

from __future__ import annotations

from ..hal.queue_op import QueueOp, retire, run_body
from ..hal.status import HalError


def execute_ready_op(device, op: QueueOp, track: int, raise_body_errors: bool = False) -> None:
    """Run an op whose waits resolved: its body (unless a wait failed), then retire it.

    A failed wait fails the op's signal list with the wait's code and message, and the body does not run.
    ``raise_body_errors`` re-raises a body failure, or a refused signal (which fails the whole signal
    list), after failing the signals (local-sync's queue calls return it, IREE [H] ``queue_op_end``);
    a host call's failure never raises (it travels through the signal semaphores).
    """
    now = device.now
    op.start_t = now()
    op.track = track
    error = op.wait_error
    should_signal = False
    if error is None:
        try:
            should_signal = run_body(device, op, track, now)
        except HalError as e:
            error = e
    op.end_t = now()
    device.recorder.op_done(op, error)
    refused = retire(device, op, error, should_signal)
    error = error or refused
    if error is not None and raise_body_errors and op.wait_error is None and op.kind != "host_call":
        raise error.clone()
