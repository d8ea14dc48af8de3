"""``sim:sync``: IREE's local-sync device (HAL_SEMANTICS §B.1) in virtual time.

Each queue call blocks the calling host thread — which counts as blocked, so virtual time advances
— until its waits are met, then runs the operation on that thread (host calls included): the
cost model's durations are busy time of that thread (its clock advances, it does not block). It
signals before returning. A failed wait is raised by the queue call and
nothing is signaled (profile [H]); a failure of the body fails the signals and is raised (a host
call's failure only fails the signals). The host call's function runs without the device lock, so
threads it starts or joins may call the device, as on local-sync. Where local-sync would hang — a single thread waiting on a
value nobody will signal — the call raises :class:`~halsim.sim.DeadlockError` instead.

>>> from halsim.sim.driver import driver
>>> from halsim.sim import DeadlockError
>>> dev = driver.create_device("sync")
>>> s, done = dev.create_semaphore(), dev.create_semaphore()
>>> try:
...     dev.queue_barrier([(s, 1)], [(done, 1)])     # nobody else will ever signal s
... except DeadlockError as e:
...     print(e.code.name, "|", e.report.unsignaled[0].why())
ABORTED | no pending operation or host thread signals s0 to >= 1
>>> dev.close()
"""

from __future__ import annotations

from reference.drivers.sync import CTS_UNSUPPORTED
from reference.hal import HalError, WaitMode
from reference.hal.queue_op import QueueOp

from ..device import SimDevice
from ..execution import drive_body, timed_body

CAPABILITIES = frozenset({"events", "host_calls", "mapping", "indirect"})

__all__ = ["CAPABILITIES", "CTS_UNSUPPORTED", "SyncDevice"]


class SyncDevice(SimDevice):
    personality = "sync"
    capabilities = CAPABILITIES

    def _run_host_function(self, fn, args, context):
        # The host call runs on the calling thread, inside its queue call: release the device lock
        # (however deeply held) meanwhile, so that a thread the function starts, joins or waits for
        # can call the device — local-sync runs such a function; holding the lock hung it.
        if self.threads.in_sim():
            return fn(args, context)
        state = self._lock._release_save()
        try:
            return fn(args, context)
        finally:
            self._lock._acquire_restore(state)

    def _schedule(self, op: QueueOp) -> None:
        track = self.recorder.track("host", f"host thread {op.thread}")
        op.track = track
        try:
            self.wait_blocking(WaitMode.ALL, op.wait, None, f"queue_{op.kind} (op {op.id})", op=op)
        except HalError as e:
            # [H] local-sync: the failed wait is returned synchronously; nothing is signaled.
            op.ready_t = op.start_t = op.end_t = self.now()
            self.recorder.op_done(op, e)
            if op.resources:
                self.recorder.release(op, [r.id for r in op.resources])
                op.resources = ()
            raise
        op.ready_t = self.now()
        # The calling thread does the work itself: its durations are busy host time, not blocking.
        self.threads.charge(self.cost.launch_ns)
        op.start_t = self.now()
        if op.kind == "host_call":  # its function runs here: a wait it makes names it (deadlock reports)
            self._running_calls[op.id] = op
        try:
            should_signal, error = drive_body(timed_body(self, op, track), self.threads.charge)
            op.end_t = self.now()
            refused = self._finish(op, error, should_signal)
        finally:
            self._running_calls.pop(op.id, None)
        error = error or refused  # a refused signal is returned by the call too ([H] queue_op_end)
        if error is not None and op.kind != "host_call":
            raise error.clone()
