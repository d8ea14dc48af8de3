"""Metal storage modes: which ``MTLResourceOptions`` a HAL memory type gets (HAL_SEMANTICS §B.5).

IREE's Metal allocator (``runtime/src/iree/hal/drivers/metal/direct_allocator.m``) first coerces the
requested memory type (``query_buffer_compatibility``): on a unified-memory device (Apple silicon, every
iOS device) a DEVICE_LOCAL|HOST_VISIBLE request becomes HOST_LOCAL|DEVICE_VISIBLE (flagged
LOW_PERFORMANCE), and the OPTIMAL bit is dropped. It then selects the resource options
(``iree_hal_metal_select_resource_options``):

* DEVICE_LOCAL and HOST_VISIBLE → ``Managed`` on macOS (only reachable on a discrete-GPU Mac, where the
  CPU and GPU copies are synchronized explicitly), ``Shared`` elsewhere;
* DEVICE_LOCAL, not HOST_VISIBLE → ``Private`` (GPU only);
* anything else (host-local memory, device visible or not) → ``Shared``;
* CPU cache mode: HOST_CACHED → ``DefaultCache``, else ``WriteCombined``;
* hazard tracking per device parameter (``Tracked`` by default here).

>>> from reference.hal import MemoryType as MT
>>> resource_options(MT.DEVICE_LOCAL).storage_mode
'Private'
>>> resource_options(MT.DEVICE_LOCAL | MT.HOST_VISIBLE)                  # Apple silicon: unified memory
ResourceOptions(storage_mode='Shared', cpu_cache_mode='WriteCombined', hazard_tracking_mode='Tracked', low_performance=True)
>>> resource_options(MT.DEVICE_LOCAL | MT.HOST_VISIBLE, unified_memory=False).storage_mode   # discrete GPU
'Managed'
>>> resource_options(MT.HOST_LOCAL | MT.HOST_CACHED).cpu_cache_mode
'DefaultCache'
"""

from __future__ import annotations

from typing import NamedTuple

from reference.hal import HalError, MemoryType, StatusCode

PLATFORMS = ("macos", "ios")


class ResourceOptions(NamedTuple):
    """The ``MTLResourceOptions`` of a buffer, by name; ``low_performance`` when the memory type was
    rewritten (IREE's LOW_PERFORMANCE compatibility bit)."""

    storage_mode: str  # Shared, Managed, Private
    cpu_cache_mode: str  # DefaultCache, WriteCombined
    hazard_tracking_mode: str  # Tracked, Untracked
    low_performance: bool = False


def _check(memory_type, platform: str) -> MemoryType:
    if isinstance(memory_type, bool) or not isinstance(memory_type, int) or memory_type < 0:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"memory_type must be MemoryType flags, got {memory_type!r}")
    if platform not in PLATFORMS:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"platform must be one of {PLATFORMS}, got {platform!r}")
    return MemoryType(memory_type)


def compatible_memory_type(memory_type, unified_memory: bool = True) -> tuple[MemoryType, bool]:
    """The memory type the allocator actually uses, and whether it was rewritten for lower performance
    (DEVICE_LOCAL|HOST_VISIBLE on unified memory → HOST_LOCAL|DEVICE_VISIBLE); OPTIMAL is dropped.

    >>> compatible_memory_type(MemoryType.OPTIMAL_FOR_DEVICE | MemoryType.HOST_VISIBLE)[0] == \\
    ...     MemoryType.HOST_LOCAL | MemoryType.DEVICE_VISIBLE
    True
    """
    mt = _check(memory_type, "macos")
    low = False
    both = MemoryType.DEVICE_LOCAL | MemoryType.HOST_VISIBLE
    if unified_memory and (mt & both) == both:
        mt = (mt & ~both) | MemoryType.HOST_LOCAL | MemoryType.DEVICE_VISIBLE
        low = True
    return MemoryType(mt & ~MemoryType.OPTIMAL), low


def resource_options(memory_type, platform: str = "macos", unified_memory: bool = True,
                     hazard_tracking: bool = True) -> ResourceOptions:
    """Storage mode, CPU cache mode and hazard tracking of a buffer of ``memory_type`` (after the
    allocator's coercion, :func:`compatible_memory_type`). ``platform``: ``"macos"`` or ``"ios"``;
    iOS devices always have unified memory."""
    _check(memory_type, platform)
    mt, low = compatible_memory_type(memory_type, unified_memory or platform == "ios")
    if (mt & MemoryType.DEVICE_LOCAL) == MemoryType.DEVICE_LOCAL:
        if mt & MemoryType.HOST_VISIBLE:
            storage = "Managed" if platform == "macos" else "Shared"
        else:
            storage = "Private"
    else:
        storage = "Shared"
    cache = "DefaultCache" if mt & MemoryType.HOST_CACHED else "WriteCombined"
    return ResourceOptions(storage, cache, "Tracked" if hazard_tracking else "Untracked", low)
