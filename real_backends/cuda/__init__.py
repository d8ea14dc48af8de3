"""``cuda``: the HAL on NVIDIA GPUs through the CUDA driver API (``cuda-bindings``; kernels by NVRTC).

The engine of ``real_backends.common`` with :class:`~.adapter.CudaAdapter` (IREE's CUDA-v2 design,
HAL_SEMANTICS §B.3); the simulator's model of it is ``sim:cuda``. Options: ``queues`` (dispatch streams,
default 1), ``event_pool_capacity`` (pooled ``CUevent``\\ s, default 32 as IREE), ``ordinal`` (the CUDA
device, default 0; or the URI's path, as IREE: ``cuda:1``) and ``graphs`` (reusable command buffers as
``CUgraph``\\ s, default True). Without the ``cuda`` extra, the NVIDIA driver or a GPU,
``create_device("cuda")`` raises UNAVAILABLE saying which, and ``query_available_devices()`` is empty.

>>> from reference import hal
>>> dev = hal.create_device("cuda")                         # doctest: +SKIP
"""

from __future__ import annotations

from reference.hal import DeviceInfo, Driver, HalError, StatusCode
from reference.hal.driver import unsupported_path
from reference.utils.cts_exclusions import sticky_failure

from ..common.device import EngineDevice, int_option
from .adapter import CudaAdapter, device_count, find_device

CAPABILITIES = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

# Unresolved waits keep an action pending (never encoded on the in-order stream), so consumer-first
# submissions work; only the engine's sticky failure excludes a test.
CTS_UNSUPPORTED: dict[str, str] = sticky_failure()


def path_ordinal(path: str, options: dict) -> int:
    """The device ordinal of ``cuda:<path>`` (IREE's ``create_device_by_path``: an integer is the
    device's index): the ``ordinal`` option without a path; a path that is no ordinal is NOT_FOUND,
    and one contradicting the ``ordinal`` option INVALID_ARGUMENT."""
    given = int_option(options, "ordinal", 0, 1 << 16)
    if not path:
        return given
    if not (path.isascii() and path.isdigit()):
        raise unsupported_path("cuda", path, "a device ordinal: cuda:1")
    ordinal = int(path)
    if given not in (0, ordinal):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"cuda:{path}: option ordinal={given} names another device")
    return ordinal


class CudaDevice(EngineDevice):
    capabilities = CAPABILITIES

    def __init__(self, uri: str, options: dict, ordinal: int):
        queues = int_option(options, "queues", 1, 64)
        capacity = int_option(options, "event_pool_capacity", 0, 1 << 16)
        cu_device, name = find_device(ordinal)
        adapter = CudaAdapter(cu_device, queues, graphs=options["graphs"])
        try:
            super().__init__(uri, options, adapter, queues, pool_capacity=capacity)
        except BaseException:
            adapter.close()
            raise
        self.trace.header["platform_device"] = name


class CudaDriver(Driver):
    name = "cuda"
    options = {"queues": 1, "event_pool_capacity": 32, "ordinal": 0, "graphs": True}

    def query_available_devices(self):
        """Every CUDA device: ``cuda`` (ordinal 0), ``cuda:1``, … (the path is the ordinal)."""
        try:
            count = device_count()
            names = [find_device(i)[1] for i in range(count)]
        except HalError:
            return []
        return [DeviceInfo("cuda" + (f":{i}" if i else ""), f"cuda ({name})", CAPABILITIES, dict(CTS_UNSUPPORTED),
                           "CUDA driver API: dispatch streams, pooled CUevents, completion thread, NVRTC kernels")
                for i, name in enumerate(names)]

    def _create(self, path, options):
        ordinal = path_ordinal(path, options)  # (named as query_available_devices names it: cuda:1)
        return CudaDevice("cuda" + (f":{ordinal}" if ordinal else ""), options, ordinal)


driver = CudaDriver()
