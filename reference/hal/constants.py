"""Constants and bit flags of the HAL, with IREE's numeric values (HAL_SEMANTICS.md §A).

>>> from reference import hal
>>> hal.MemoryType.DEVICE_LOCAL == hal.MemoryType.DEVICE_VISIBLE | (1 << 5)
True
>>> int(hal.BufferUsage.DEFAULT)
3075
"""

from __future__ import annotations

import enum

MAX_SEMAPHORE_VALUE = 2**31 - 2
SEMAPHORE_FAILURE_VALUE = 2**31 - 1
WHOLE_BUFFER = 2**64 - 1
QUEUE_AFFINITY_ANY = 2**64 - 1
MAX_UPDATE_SIZE = 64 * 1024  # IREE_HAL_COMMAND_BUFFER_MAX_UPDATE_SIZE: queue_update splits above it


class MemoryType(enum.IntFlag):
    NONE = 0
    OPTIMAL = 1 << 0
    HOST_VISIBLE = 1 << 1
    HOST_COHERENT = 1 << 2
    HOST_CACHED = 1 << 3
    DEVICE_VISIBLE = 1 << 4
    DEVICE_LOCAL = (1 << 4) | (1 << 5)
    HOST_LOCAL = (1 << 1) | (1 << 2) | (1 << 6)
    OPTIMAL_FOR_HOST = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 6)
    OPTIMAL_FOR_DEVICE = (1 << 0) | (1 << 4) | (1 << 5)


class MemoryAccess(enum.IntFlag):
    NONE = 0
    READ = 1 << 0
    WRITE = 1 << 1
    DISCARD = 1 << 2
    DISCARD_WRITE = (1 << 1) | (1 << 2)
    MAY_ALIAS = 1 << 3
    UNALIGNED = 1 << 4
    ANY = 1 << 5
    ALL = (1 << 0) | (1 << 1) | (1 << 2)


class BufferUsage(enum.IntFlag):
    NONE = 0
    TRANSFER_SOURCE = 1 << 0
    TRANSFER_TARGET = 1 << 1
    TRANSFER = (1 << 0) | (1 << 1)
    DISPATCH_INDIRECT_PARAMETERS = 1 << 8
    DISPATCH_UNIFORM_READ = 1 << 9
    DISPATCH_STORAGE_READ = 1 << 10
    DISPATCH_STORAGE_WRITE = 1 << 11
    DISPATCH_STORAGE = (1 << 10) | (1 << 11)
    DISPATCH_IMAGE_READ = 1 << 12
    DISPATCH_IMAGE_WRITE = 1 << 13
    DISPATCH_IMAGE = (1 << 12) | (1 << 13)
    DISPATCH = (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12) | (1 << 13)
    SHARING_EXPORT = 1 << 16
    SHARING_REPLICATE = 1 << 17
    SHARING_CONCURRENT = 1 << 18
    SHARING_IMMUTABLE = 1 << 19
    MAPPING_SCOPED = 1 << 24
    MAPPING_PERSISTENT = 1 << 25
    MAPPING_OPTIONAL = 1 << 26
    MAPPING_ACCESS_RANDOM = 1 << 27
    MAPPING_ACCESS_SEQUENTIAL_WRITE = 1 << 28
    MAPPING = (1 << 24) | (1 << 27)
    DEFAULT = (1 << 0) | (1 << 1) | (1 << 10) | (1 << 11)


class BufferCompatibility(enum.IntFlag):
    NONE = 0
    ALLOCATABLE = 1 << 0
    IMPORTABLE = 1 << 1
    EXPORTABLE = 1 << 2
    QUEUE_TRANSFER = 1 << 10
    QUEUE_DISPATCH = 1 << 11
    LOW_PERFORMANCE = 1 << 20


class BufferPlacementFlags(enum.IntFlag):
    NONE = 0
    ASYNCHRONOUS = 1 << 0
    INDETERMINATE_LIFETIME = 1 << 1


class CommandBufferMode(enum.IntFlag):
    DEFAULT = 0
    ONE_SHOT = 1 << 0
    ALLOW_INLINE_EXECUTION = 1 << 4
    UNVALIDATED = 1 << 5


class CommandCategory(enum.IntFlag):
    NONE = 0
    TRANSFER = 1 << 0
    DISPATCH = 1 << 1
    ANY = (1 << 0) | (1 << 1)


class ExecutionStage(enum.IntFlag):
    NONE = 0
    COMMAND_ISSUE = 1 << 0
    COMMAND_PROCESS = 1 << 1
    DISPATCH = 1 << 2
    TRANSFER = 1 << 3
    COMMAND_RETIRE = 1 << 4
    HOST = 1 << 5


class AccessScope(enum.IntFlag):
    NONE = 0
    INDIRECT_COMMAND_READ = 1 << 0
    CONSTANT_READ = 1 << 1
    DISPATCH_READ = 1 << 2
    DISPATCH_WRITE = 1 << 3
    TRANSFER_READ = 1 << 4
    TRANSFER_WRITE = 1 << 5
    HOST_READ = 1 << 6
    HOST_WRITE = 1 << 7
    MEMORY_READ = 1 << 8
    MEMORY_WRITE = 1 << 9


class DispatchFlags(enum.IntFlag):
    NONE = 0
    DYNAMIC_INDIRECT_PARAMETERS = 1 << 0
    STATIC_INDIRECT_PARAMETERS = 1 << 1
    CUSTOM_DIRECT_ARGUMENTS = 1 << 2
    DYNAMIC_INDIRECT_ARGUMENTS = 1 << 3
    STATIC_INDIRECT_ARGUMENTS = 1 << 4
    ALLOW_INLINE_EXECUTION = 1 << 5
    # The caller promises the executable and buffers outlive the dispatch; the reference drivers
    # still retain them (retaining is always a correct implementation of a borrow).
    BORROW_RESOURCE_LIFETIMES = 1 << 6


class WaitMode(enum.IntEnum):
    ALL = 0
    ANY = 1


# The CTS capability tags (HAL_SEMANTICS §C.0) a device may declare.
CAPABILITY_TAGS = frozenset({"async_queue", "events", "host_calls", "mapping", "indirect", "file_io"})
