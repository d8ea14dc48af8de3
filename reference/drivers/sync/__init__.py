"""``local-sync``: IREE's synchronous CPU device (HAL_SEMANTICS §B.1).

Every queue call blocks the calling thread until its waits are satisfied, runs the work inline and
signals before returning. A failed wait is returned synchronously from the queue call and nothing is
signaled (profile [H]); programs that submit a consumer before its producer need another host thread.
"""

from __future__ import annotations

from ...hal.driver import DeviceInfo, Driver, default_path_only
from .device import SyncDevice

CAPABILITIES = frozenset({"events", "host_calls", "mapping", "indirect"})

# Where IREE's CTS does not run on local-sync (HAL_SEMANTICS §B.1 [H] and §C.1.2): the sync driver
# blocks on semaphore waits, so it cannot model wait-before-signal queue submission.
_BLOCKS = "sync driver blocks on semaphore waits: cannot model wait-before-signal queue submission"
CTS_UNSUPPORTED = {
    "QueueAllocaTest.BufferMetadata": _BLOCKS,
    "QueueAllocaTest.DeallocaReleasesMemory": _BLOCKS,
    "QueueAllocaTest.AllocaWithWaitSemaphores": _BLOCKS,
    "QueueTransferTest.UpdateCapturesSourceBeforeWaitResolves": _BLOCKS,
    "QueueDispatchTest.DeferredNoopDispatch": _BLOCKS,
    "QueueDispatchTest.DeferredWaitBeforeSignalDispatch": _BLOCKS,
    "DispatchReuseTest.DeferredExecuteRetainsDispatchBindingTable": _BLOCKS,
}


class SyncDriver(Driver):
    name = "local-sync"
    options = {}

    def query_available_devices(self):
        return [DeviceInfo("local-sync", "local-sync", CAPABILITIES, CTS_UNSUPPORTED,
                           "inline execution on the calling thread")]

    def _create(self, path, options):
        default_path_only("local-sync", path)
        return SyncDevice("local-sync", options)


driver = SyncDriver()
