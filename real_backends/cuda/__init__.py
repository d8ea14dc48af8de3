"""``cuda``: the HAL on NVIDIA GPUs through the CUDA driver API (``cuda-bindings``; kernels by NVRTC).

The engine of ``real_backends.common`` with :class:`~.adapter.CudaAdapter` (IREE's CUDA-v2 design,
HAL_SEMANTICS §B.3); the simulator's model of it is ``sim:cuda``. Options: ``queues`` (dispatch streams,
default 1), ``event_pool_capacity`` (pooled ``CUevent``\\ s, default 32 as IREE), ``ordinal`` (the CUDA
device, default 0; or the URI's path, as IREE: ``cuda:1``, or the device's UUID as ``nvidia-smi -L`` lists it
(a MIG instance's ``MIG-…`` UUID given after ``GPU-``, as IREE parses it):
``cuda:GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``) and ``graphs`` (reusable command buffers as
``CUgraph``\\ s, default True). Without the ``cuda`` extra, the NVIDIA driver or a GPU,
``create_device("cuda")`` raises UNAVAILABLE saying which, and ``query_available_devices()`` is empty.

>>> from reference import hal
>>> dev = hal.create_device("cuda")                         # doctest: +SKIP
"""

from __future__ import annotations

import re

from reference.hal import DeviceInfo, Driver, HalError, StatusCode
from reference.hal.driver import unsupported_path
from reference.utils.cts_exclusions import sticky_failure

from ..common.device import EngineDevice, int_option
from .adapter import CudaAdapter, device_count, device_uuid, find_device, present_count

CAPABILITIES = frozenset({"async_queue", "host_calls", "mapping", "indirect"})

# Unresolved waits keep an action pending (never encoded on the in-order stream), so consumer-first
# submissions work; only the engine's sticky failure excludes a test.
CTS_UNSUPPORTED: dict[str, str] = sticky_failure()


# IREE's create_device_by_path: "GPU-", then cuDeviceGetUuid's 16 bytes in hex digits of either case, a
# '-' or ' ' allowed between two bytes (iree_string_view_parse_hex_bytes); nvidia-smi -L prints 8-4-4-4-12.
_UUID_HEX = re.compile(r"[0-9a-fA-F]{2}(?:[- ]?[0-9a-fA-F]{2}){15}")
UUID_FORM = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L lists it"


def uuid_path(uuid: bytes) -> str:
    """A device's UUID path as IREE's ``query_available_devices`` and ``nvidia-smi -L`` print it."""
    h = uuid.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def uuid_ordinal(path: str) -> int:
    """The ordinal of the device whose UUID ``path`` (``GPU-…``) names; NOT_FOUND naming the path for
    a malformed UUID or one no device has."""
    digits = path[len("GPU-"):]
    if not _UUID_HEX.fullmatch(digits):
        raise unsupported_path("cuda", path, f"a device UUID is 32 hex digits: {UUID_FORM}")
    wanted = bytes.fromhex(digits.replace("-", ""))  # (fromhex skips the spaces)
    # CUDA has no lookup by UUID: scan the devices, as IREE does (all 16 bytes compared)
    uuids = [device_uuid(i) for i in range(present_count())]
    if wanted not in uuids:
        raise HalError(StatusCode.NOT_FOUND, f"cuda: no device {path} (the driver has {len(uuids)}: "
                       f"{', '.join(map(uuid_path, uuids))})")
    return uuids.index(wanted)


def path_ordinal(path: str, options: dict) -> int:
    """The device ordinal of ``cuda:<path>`` (IREE's ``create_device_by_path``: an integer is the
    device's index, ``GPU-<uuid>`` the device of that UUID): the ``ordinal`` option without a path; any
    other path is NOT_FOUND, and one contradicting the ``ordinal`` option INVALID_ARGUMENT."""
    given = int_option(options, "ordinal", 0, 1 << 16)
    if not path:
        return given
    if path.startswith("GPU-"):
        ordinal = uuid_ordinal(path)
    elif path.isascii() and path.isdigit():
        ordinal = int(path)
    else:
        raise unsupported_path("cuda", path, f"a device ordinal or UUID: cuda:1, cuda:{UUID_FORM}")
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
        """Every CUDA device: ``cuda`` (ordinal 0), ``cuda:1``, … (the path is the ordinal; IREE's is the
        UUID, which the description gives: ``cuda:GPU-…`` names the device too)."""
        try:
            count = device_count()
            found = [(find_device(i)[1], uuid_path(device_uuid(i))) for i in range(count)]
        except HalError:
            return []
        what = "CUDA driver API: dispatch streams, pooled CUevents, completion thread, NVRTC kernels"
        return [DeviceInfo("cuda" + (f":{i}" if i else ""), f"cuda ({name})", CAPABILITIES, dict(CTS_UNSUPPORTED),
                           f"{uuid}: {what}") for i, (name, uuid) in enumerate(found)]

    def _create(self, path, options):
        ordinal = path_ordinal(path, options)  # (named as query_available_devices names it: cuda:1)
        return CudaDevice("cuda" + (f":{ordinal}" if ordinal else ""), options, ordinal)


driver = CudaDriver()
