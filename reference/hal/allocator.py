"""The device allocator: IREE's heap allocator rules (``runtime/src/iree/hal/allocator_heap.c``).

Every buffer is host-visible (the bytes live in host memory); a buffer may be used on the queue only
when its memory type is DEVICE_VISIBLE (QUEUE_TRANSFER / QUEUE_DISPATCH compatibility), exactly as
IREE's CPU devices enforce so that programs stay portable to discrete GPUs.

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     compat, size = dev.allocator.query_buffer_compatibility(
...         1024, hal.MemoryType.HOST_LOCAL | hal.MemoryType.DEVICE_VISIBLE, hal.BufferUsage.TRANSFER)
...     bool(compat & hal.BufferCompatibility.QUEUE_TRANSFER), size
(True, 1024)
"""

from __future__ import annotations

from .buffer import Buffer, BufferPlacement
from .constants import (
    BufferCompatibility,
    BufferPlacementFlags,
    BufferUsage,
    MemoryAccess,
    MemoryType,
)
from .status import HalError, StatusCode

MAX_ALLOCATION_SIZE = 1 << 40  # refuse absurd sizes up front rather than dying in bytearray()


def _flag(value, enum_type, what: str):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a {enum_type.__name__}, got {value!r}")
    return enum_type(value)


def _usage(value) -> BufferUsage:
    """A caller's usage, canonicalized as IREE's ``iree_hal_buffer_params_canonicalize`` (run by
    ``iree_hal_allocator_allocate_buffer`` and ``query_buffer_compatibility``): 0 means DEFAULT."""
    usage = _flag(value, BufferUsage, "usage")
    return usage or BufferUsage.DEFAULT


def compatibility_of(memory_type: MemoryType, usage: BufferUsage) -> tuple[BufferCompatibility, MemoryType, BufferUsage]:
    """Compatibility bits and the adjusted (type, usage) the heap allocator would use."""
    compat = BufferCompatibility.ALLOCATABLE | BufferCompatibility.IMPORTABLE | BufferCompatibility.EXPORTABLE
    if memory_type & MemoryType.DEVICE_VISIBLE:
        if usage & BufferUsage.TRANSFER:
            compat |= BufferCompatibility.QUEUE_TRANSFER
        if usage & BufferUsage.DISPATCH_STORAGE:
            compat |= BufferCompatibility.QUEUE_DISPATCH
    # int arithmetic: ~MemoryType.OPTIMAL would clear the bits MemoryType does not name, which IREE keeps
    memory_type = (int(memory_type) | int(MemoryType.HOST_VISIBLE)) & ~int(MemoryType.OPTIMAL)
    usage = usage | BufferUsage.MAPPING | BufferUsage.TRANSFER
    return compat, MemoryType(memory_type), BufferUsage(usage)


def host_bytes(size: int) -> bytearray:
    """``size`` zeroed bytes of host memory; RESOURCE_EXHAUSTED naming the size when the host cannot
    provide them (IREE: "libc allocator failed the request"), not Python's MemoryError."""
    try:
        return bytearray(size)
    except MemoryError:
        raise HalError(StatusCode.RESOURCE_EXHAUSTED,
                       f"size {size}: the host cannot allocate {size} bytes") from None


class Allocator:
    """Allocates buffers for one device (``device.allocator``)."""

    def __init__(self, device):
        self.device = device

    def query_buffer_compatibility(self, size: int, memory_type=MemoryType.DEVICE_LOCAL,
                                   usage=BufferUsage.DEFAULT) -> tuple[BufferCompatibility, int]:
        size = self._check_size(size)
        memory_type = _flag(memory_type, MemoryType, "memory_type")
        usage = _usage(usage)
        compat, _, _ = compatibility_of(memory_type, usage)
        return compat, size

    def allocate_buffer(self, size: int,
                        memory_type=MemoryType.DEVICE_LOCAL | MemoryType.HOST_VISIBLE,
                        usage=BufferUsage.DEFAULT | BufferUsage.MAPPING,
                        access=MemoryAccess.ALL) -> Buffer:
        size = self._check_size(size)
        memory_type = _flag(memory_type, MemoryType, "memory_type")
        usage = _usage(usage)
        access = _flag(access, MemoryAccess, "access") or MemoryAccess.ALL
        compat, memory_type, usage = compatibility_of(memory_type, usage)
        return self.device._new_buffer(size, memory_type, usage, access, compat, host_bytes(size))

    def allocate_transient(self, size: int, memory_type, usage, access, queue: int) -> Buffer:
        """The uncommitted buffer ``queue_alloca`` returns. Its bytes are reserved now, as IREE's heap
        allocator does at the call (an unsatisfiable size fails the call, RESOURCE_EXHAUSTED, on every
        device), and become its storage when the queue runs the alloca."""
        size = self._check_size(size)
        memory_type = _flag(memory_type, MemoryType, "memory_type")
        usage = _usage(usage)
        access = _flag(access, MemoryAccess, "access") or MemoryAccess.ALL  # [H] access 0 means ALL
        compat, memory_type, usage = compatibility_of(memory_type, usage)
        placement = BufferPlacement(self.device, 1 << queue, BufferPlacementFlags.ASYNCHRONOUS)
        reserved = host_bytes(size)  # before the buffer exists (and is traced): a failed call makes none
        buf = self.device._new_buffer(size, memory_type, usage, access, compat, None, placement)
        buf._reserved = reserved
        return buf

    @staticmethod
    def _check_size(size) -> int:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"size must be an int >= 0, got {size!r}")
        if size > MAX_ALLOCATION_SIZE:
            raise HalError(StatusCode.RESOURCE_EXHAUSTED, f"size {size} exceeds the allocator's limit {MAX_ALLOCATION_SIZE}")
        return size
