"""The HAL contract: the Python API every halsim device implements (DESIGN §3).

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     s = dev.create_semaphore(0)
...     s.signal(1)
...     dev.wait_semaphores(hal.WaitMode.ALL, [(s, 1)], timeout=0)
"""

from .allocator import Allocator
from .buffer import Buffer, BufferPlacement, BufferRef, Mapping, Range, buffer_map_copy
from .command_buffer import Cmd, CommandBuffer
from .constants import (
    CAPABILITY_TAGS,
    MAX_SEMAPHORE_VALUE,
    QUEUE_AFFINITY_ANY,
    SEMAPHORE_FAILURE_VALUE,
    WHOLE_BUFFER,
    AccessScope,
    BufferCompatibility,
    BufferPlacementFlags,
    BufferUsage,
    CommandBufferMode,
    CommandCategory,
    DispatchFlags,
    ExecutionStage,
    MemoryAccess,
    MemoryType,
    WaitMode,
)
from .device import Device
from .driver import (
    DeviceInfo,
    Driver,
    available_devices,
    available_drivers,
    create_device,
    get_driver,
    parse_uri,
)
from .event import Event
from .executable import Executable, ExportInfo
from .queue_op import HostCallContext, QueueOp
from .semaphore import Semaphore
from .status import HalError, StatusCode

__all__ = [
    "AccessScope", "Allocator", "Buffer", "BufferCompatibility", "BufferPlacement", "BufferPlacementFlags",
    "BufferRef", "BufferUsage", "CAPABILITY_TAGS", "Cmd", "CommandBuffer", "CommandBufferMode",
    "CommandCategory", "Device", "DeviceInfo", "DispatchFlags", "Driver", "Event", "ExecutionStage",
    "Executable", "ExportInfo", "HalError", "HostCallContext", "MAX_SEMAPHORE_VALUE", "Mapping",
    "MemoryAccess", "MemoryType", "QUEUE_AFFINITY_ANY", "QueueOp", "Range", "SEMAPHORE_FAILURE_VALUE",
    "Semaphore", "StatusCode", "WHOLE_BUFFER", "WaitMode", "available_devices", "available_drivers",
    "buffer_map_copy", "create_device", "get_driver", "parse_uri",
]
