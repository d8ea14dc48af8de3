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
from reference.hal.driver import default_path_only
from reference.utils.cts_exclusions import in_order_queue, sticky_failure

from ..common.device import EngineDevice, int_option
from .adapter import PLATFORM, OpenCLAdapter, find_device

CAPABILITIES = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect"})

CTS_UNSUPPORTED: dict[str, str] = {**in_order_queue("OpenCL queue"), **sticky_failure()}


class OpenCLDevice(EngineDevice):
    capabilities = CAPABILITIES
    in_order_waits = True  # unresolved waits are user events on the in-order queue

    def __init__(self, uri: str, options: dict):
        queues = int_option(options, "queues", 1, 64)
        cl_device = find_device(options["platform"])
        super().__init__(uri, options, OpenCLAdapter(cl_device, queues), queues, pool_capacity=None)
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
        default_path_only("opencl", path, "opencl has one device, the first of the platform option's "
                          "platform: the empty path, opencl or opencl?platform=NAME")
        return OpenCLDevice("opencl", options)


driver = OpenCLDriver()
