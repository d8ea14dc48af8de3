"""``opencl``: the HAL on OpenCL (pyopencl; PoCL's CPU device from the ``opencl`` extra runs in CI).

The engine of ``real_backends.common`` with :class:`~.adapter.OpenCLAdapter`; the simulator's model of
it is ``sim:opencl``. Options: ``queues`` (in-order command queues, default 1) and ``platform`` (a
substring of the OpenCL platform's name, default PoCL's "Portable Computing Language"). Without
pyopencl or such a platform, ``create_device`` raises UNAVAILABLE saying which.

>>> from reference import hal
>>> dev = hal.create_device("opencl")                       # doctest: +SKIP
"""

from __future__ import annotations

from reference.hal import DeviceInfo, Driver, HalError

from ..common.device import EngineDevice
from .adapter import PLATFORM, OpenCLAdapter, find_device

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})

_IN_ORDER = "submits a consumer before its producer on the same in-order OpenCL queue, which stalls the " \
            "queue on the consumer's user event forever"
_STICKY = "a failed wait makes the queue status sticky (HAL_SEMANTICS B.3): every later action fails"
CTS_UNSUPPORTED: dict[str, str] = {f"SemaphoreSubmissionTest.{name}": _IN_ORDER for name in (
    "IntermediateSemaphoreBetweenDeviceBatches", "TwoBatchesWaitingOn1FormerBatchAmongst2",
    "TwoBatchesWaitingOnDifferentSemaphoreValues", "BatchWaitingOnAnotherAndHostSignal",
    "DeviceBatchSignalAnotherAndHost")}
CTS_UNSUPPORTED["QueueAllocaTest.FailedDeallocaWaitDoesNotDealloca"] = _STICKY


class OpenCLDevice(EngineDevice):
    capabilities = CAPABILITIES

    def __init__(self, uri: str, options: dict):
        cl_device = find_device(options["platform"])
        adapter = OpenCLAdapter(cl_device, options["queues"]) if isinstance(options["queues"], int) and \
            not isinstance(options["queues"], bool) and 1 <= options["queues"] <= 64 else None
        super().__init__(uri, options, adapter, options["queues"], pool_capacity=None)
        self.trace.header["platform_device"] = cl_device.name


class OpenCLDriver(Driver):
    name = "opencl"
    options = {"queues": 1, "platform": PLATFORM}

    def query_available_devices(self):
        try:
            cl_device = find_device(PLATFORM)
        except HalError:
            return []
        return [DeviceInfo("opencl", f"opencl ({cl_device.name})", CAPABILITIES, dict(CTS_UNSUPPORTED),
                           "OpenCL (pyopencl): in-order queues, markers, user events, event profiling")]

    def _create(self, path, options):
        return OpenCLDevice("opencl" + (f":{path}" if path else ""), options)


driver = OpenCLDriver()
