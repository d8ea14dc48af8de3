"""``metal``: the HAL on Apple GPUs through Metal (``pyobjc-framework-Metal``; macOS only).

The engine of ``real_backends.common`` with :class:`~.adapter.MetalAdapter` (HAL_SEMANTICS §B.5: three-step
submission with ``MTLSharedEvent``\\ s, completion handlers, the command-segment planner shared with
``sim:metal``, storage modes per memory type, MSL kernels). Options: ``queues`` (command queues,
default 1) and ``event_pool_capacity`` (pooled shared events, default 32). Off macOS, without the
``metal`` extra or without a Metal device, ``create_device("metal")`` raises UNAVAILABLE saying which,
and ``query_available_devices()`` is empty.

>>> from reference import hal
>>> dev = hal.create_device("metal")                        # doctest: +SKIP
"""

from __future__ import annotations

from reference.hal import DeviceInfo, Driver, HalError
from reference.hal.driver import default_path_only
from reference.utils.cts_exclusions import sticky_failure

from ..common.device import EngineDevice, int_option
from .adapter import MetalAdapter, find_device

CAPABILITIES = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

# Unresolved waits keep an action pending (never encoded on the in-order stream), so consumer-first
# submissions work; only the engine's sticky failure excludes a test.
CTS_UNSUPPORTED: dict[str, str] = sticky_failure()


class MetalDevice(EngineDevice):
    capabilities = CAPABILITIES

    def __init__(self, uri: str, options: dict):
        queues = int_option(options, "queues", 1, 64)
        capacity = int_option(options, "event_pool_capacity", 0, 1 << 16)
        mtl_device = find_device()
        adapter = MetalAdapter(mtl_device, queues)
        super().__init__(uri, options, adapter, queues, pool_capacity=capacity)
        self.trace.header["platform_device"] = str(mtl_device.name())


class MetalDriver(Driver):
    name = "metal"
    options = {"queues": 1, "event_pool_capacity": 32}

    def query_available_devices(self):
        try:
            mtl_device = find_device()
        except HalError:
            return []
        return [DeviceInfo("metal", f"metal ({mtl_device.name()})", CAPABILITIES, dict(CTS_UNSUPPORTED),
                           "Metal (pyobjc): command queues, MTLSharedEvents, completion handlers, MSL kernels")]

    def _create(self, path, options):
        default_path_only("metal", path, "metal has one device, the system default: the empty path, metal")
        return MetalDevice("metal", options)


driver = MetalDriver()
