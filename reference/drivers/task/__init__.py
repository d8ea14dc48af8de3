"""``local-task``: IREE's asynchronous CPU device (HAL_SEMANTICS §B.2).

Queue calls return at once. An operation waits in the pending set until every wait semaphore reached
its value — it is re-examined each time one of them is signaled or fails (a timepoint per wait) — then
runs on one of ``workers`` threads. Submissions may come before their producers (wait-before-signal),
a blocked operation never holds back a ready one (no head-of-line blocking), and a failed wait fails
the operation's signal semaphores with the original status code and message.
"""

from __future__ import annotations

from ...hal.driver import DeviceInfo, Driver, default_path_only
from .device import TaskDevice

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})


class TaskDriver(Driver):
    name = "local-task"
    options = {"workers": 4}

    def query_available_devices(self):
        return [DeviceInfo("local-task", "local-task", CAPABILITIES, {},
                           "asynchronous: pending set, worker threads, wait-before-signal")]

    def _create(self, path, options):
        default_path_only("local-task", path)
        return TaskDevice("local-task", options)


driver = TaskDriver()
