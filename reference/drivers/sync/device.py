"""The local-sync device: queue calls run inline on the calling thread."""

from __future__ import annotations

from ...hal.constants import WaitMode
from ...hal.device import Device
from ...hal.queue_op import QueueOp
from ...hal.status import HalError
from ...hal.wait import blocking_wait
from ..common import execute_ready_op


class SyncDevice(Device):
    capabilities = frozenset({"events", "host_calls", "mapping", "indirect"})

    def _submit(self, op: QueueOp) -> None:
        track = self.recorder.track("host", f"host thread {op.thread}")
        try:
            blocking_wait(WaitMode.ALL, op.wait, None)
        except HalError as e:
            # [H] local-sync: the failed wait is returned synchronously; nothing is signaled.
            op.ready_t = op.start_t = op.end_t = self.now()
            op.track = track
            self.recorder.op_done(op, e)
            self.recorder.release(op, [r.id for r in op.resources])
            op.resources = ()
            raise
        op.ready_t = self.now()
        execute_ready_op(self, op, track, raise_body_errors=True)
