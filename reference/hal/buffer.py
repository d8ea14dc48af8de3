"""Buffers, subspans, buffer references and the host mapping helpers (HAL_SEMANTICS §A.6).

A :class:`Buffer` is a view (``offset``, ``byte_length``) of an allocation (its *root*) whose bytes
live in a ``bytearray``. Transient buffers from ``queue_alloca`` reserve their bytes at the call (so an
allocation that cannot be satisfied fails there, as in IREE) but have no storage until the queue
commits them, and none after ``queue_dealloca`` decommits them.

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     buf = dev.allocator.allocate_buffer(8)
...     buf.map_fill(0, hal.WHOLE_BUFFER, 0xAB23, 2)
...     sub = buf.subspan(2, 4)
...     sub.map_write(0, b"\\x01\\x02")
...     buf.map_read().hex()
'23ab010223ab23ab'
"""

from __future__ import annotations

from typing import NamedTuple

from .constants import (
    WHOLE_BUFFER,
    BufferCompatibility,
    BufferPlacementFlags,
    BufferUsage,
    MemoryAccess,
    MemoryType,
)
from .host_call_context import current as _current_host_call
from .status import HalError, StatusCode

_PATTERN_LENGTHS = (1, 2, 4)
_ACCESS_ANY = int(MemoryAccess.ANY)
_READ_WRITE = int(MemoryAccess.READ | MemoryAccess.WRITE)


def _int_arg(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be an int, got {type(value).__name__}")
    if value < 0:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be >= 0, got {value}")
    return value


def calculate_range(byte_length: int, offset, length, what: str = "range") -> tuple[int, int]:
    """IREE ``iree_hal_buffer_calculate_range``: resolve WHOLE_BUFFER and check bounds (OUT_OF_RANGE)."""
    offset = _int_arg(offset, f"{what} offset")
    length = _int_arg(length, f"{what} length")
    if offset > byte_length:
        raise HalError(StatusCode.OUT_OF_RANGE, f"{what} offset {offset} past buffer length {byte_length}")
    if length == WHOLE_BUFFER:
        return offset, byte_length - offset
    if offset + length > byte_length:
        raise HalError(
            StatusCode.OUT_OF_RANGE,
            f"{what} [{offset}, {offset + length}) past buffer length {byte_length}",
        )
    return offset, length


def validate_access(allowed: MemoryAccess, required: MemoryAccess, what: str) -> None:
    """IREE ``iree_hal_buffer_validate_access`` (§A.6 B2)."""
    r = int(required)  # int arithmetic: an IntFlag operator costs about a microsecond
    if r & _ACCESS_ANY:
        return
    if not r & _READ_WRITE:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}: access {required!r} requests neither READ nor WRITE")
    if (int(allowed) & r) != r:
        raise HalError(
            StatusCode.PERMISSION_DENIED,
            f"{what}: buffer allows access {allowed!r}, operation needs {required!r}",
        )


def validate_usage(allowed: BufferUsage, required: BufferUsage, what: str) -> None:
    r = int(required)
    if (int(allowed) & r) != r:
        raise HalError(StatusCode.PERMISSION_DENIED, f"{what}: buffer usage {allowed!r} lacks {required!r}")


def validate_memory_type(actual: MemoryType, required: MemoryType, what: str) -> None:
    r = int(required)
    if (int(actual) & r) != r:
        raise HalError(StatusCode.PERMISSION_DENIED, f"{what}: memory type {actual!r} lacks {required!r}")


def check_pattern(pattern, pattern_length) -> bytes:
    """Validate a fill pattern and return its little-endian bytes (pattern length checked first)."""
    if pattern_length not in _PATTERN_LENGTHS or isinstance(pattern_length, bool):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"pattern_length must be 1, 2 or 4, got {pattern_length!r}")
    if isinstance(pattern, bool) or not isinstance(pattern, int):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"pattern must be an int, got {type(pattern).__name__}")
    if pattern < 0 or pattern >= 1 << (8 * pattern_length):
        raise HalError(
            StatusCode.INVALID_ARGUMENT, f"pattern {pattern:#x} does not fit in {pattern_length} byte(s)"
        )
    return pattern.to_bytes(pattern_length, "little")


class BufferPlacement(NamedTuple):
    device: object
    queue_affinity: int
    flags: BufferPlacementFlags


class Buffer:
    """A device buffer or a subspan of one. Make them with ``device.allocator.allocate_buffer``."""

    __slots__ = (
        "device", "id", "byte_length", "memory_type", "allowed_usage", "allowed_access",
        "compatibility", "placement", "_parent", "_offset", "_storage", "_state", "_reserved", "_host_after",
        "__weakref__",
    )

    def __init__(self, device, buf_id, byte_length, memory_type, usage, access, compatibility,
                 placement=None, storage=None, root=None, offset=0):
        self.device = device
        self.id = buf_id
        self.byte_length = byte_length
        self.memory_type = MemoryType(memory_type)
        self.allowed_usage = BufferUsage(usage)
        self.allowed_access = MemoryAccess(access)
        self.compatibility = BufferCompatibility(compatibility)
        self.placement = placement
        self._parent = root  # None for an allocation itself (no self-reference: freed by refcount)
        self._offset = offset
        self._storage = storage
        # root only: "committed" | "reserved" (alloca not yet run) | "decommitted"
        self._state = "committed" if storage is not None else "reserved"
        self._reserved = None  # a transient's bytes until its alloca commits them (Allocator)
        # Wait timepoints of an alloca committed ahead of its waits (see commit); None when there are none.
        self._host_after = None

    def __repr__(self) -> str:
        sub = f" @{self._offset}" if self._parent is not None else ""
        return f"<Buffer {self.id}{sub} {self.byte_length} B>"

    @property
    def _root(self) -> "Buffer":
        return self._parent or self

    @property
    def allocation_size(self) -> int:
        return self._root.byte_length

    @property
    def byte_offset(self) -> int:
        """Offset of this view inside its allocation."""
        return self._offset

    @property
    def root(self) -> "Buffer":
        """The allocation this buffer views (itself for an allocation)."""
        return self._parent or self

    @property
    def is_transient(self) -> bool:
        p = self._root.placement
        return p is not None and bool(p.flags & BufferPlacementFlags.ASYNCHRONOUS)

    def subspan(self, offset: int, length: int) -> "Buffer":
        offset, length = calculate_range(self.byte_length, offset, length, "subspan")
        return Buffer(self.device, self.id, length, self.memory_type, self.allowed_usage,
                      self.allowed_access, self.compatibility, root=self._root,
                      offset=self._offset + offset)

    # -- storage, for devices executing work -------------------------------------------------------

    def storage(self, what: str = "buffer") -> bytearray:
        """The allocation's bytes; FAILED_PRECONDITION when a transient is not (or no longer) committed."""
        root = self._root
        if root._storage is None:
            state = "used before its queue_alloca committed it" if root._state == "reserved" else \
                "used after queue_dealloca released it"
            raise HalError(StatusCode.FAILED_PRECONDITION, f"{what} {root.id} {state}")
        return root._storage

    def commit(self, host_after=()) -> None:
        """Give the allocation its (reserved) storage. ``host_after`` are the alloca's wait timepoints:
        a device that commits when it *issues* the alloca, ahead of its waits (``opencl``: later work
        on its in-order queue needs the storage then), keeps host mapping refused until they are all
        reached, as on devices that commit after the waits."""
        root = self._root
        if root._storage is None:
            root._storage = root._reserved if root._reserved is not None else bytearray(root.byte_length)
            root._reserved = None
        root._state = "committed"
        pending = tuple(tp for tp in host_after if tp[0].poll(tp[1]) is not True)
        root._host_after = pending or None

    def decommit(self) -> None:
        root = self._root
        root._storage = root._reserved = root._host_after = None
        root._state = "decommitted"

    def _check_host_after(self, what: str) -> None:
        """Host mapping of an allocation committed ahead of its alloca's waits: refused until reached."""
        root = self._root
        pending = root._host_after
        if pending is not None:
            if any(sem.poll(value) is not True for sem, value in pending):
                raise HalError(StatusCode.FAILED_PRECONDITION,
                               f"{what} {root.id} used before its queue_alloca committed it")
            root._host_after = None

    # -- host mapping helpers ----------------------------------------------------------------------

    def _map(self, access: MemoryAccess, offset, length, what: str) -> tuple[bytearray, int, int]:
        validate_access(self.allowed_access, access, what)
        validate_memory_type(self.memory_type, MemoryType.HOST_VISIBLE, what)
        validate_usage(self.allowed_usage, BufferUsage.MAPPING_SCOPED, what)
        offset, length = calculate_range(self.byte_length, offset, length, what)
        store = self.storage(what)
        if self._root._host_after is not None:
            self._check_host_after(what)
        return store, self._offset + offset, length

    def map_read(self, offset: int = 0, length: int = WHOLE_BUFFER) -> bytes:
        if length == 0:
            _int_arg(offset, "map_read offset")
            return b""
        data, start, length = self._map(MemoryAccess.READ, offset, length, "map_read")
        out = bytes(data[start:start + length])
        self.device.recorder.host_read(self._root.id, start, out, self._who())
        return out

    def _who(self) -> dict:
        """Who is accessing the bytes from the host, for the trace: a host call or a host thread."""
        op = _current_host_call()
        # host_thread(), not known_host_thread(): a thread whose first device use is touching bytes
        # (handed a buffer through a queue) must be traced as itself, or the checks cannot order it
        return {"op": op} if op is not None else {"thread": self.device.host_thread()}

    def _host_access(self, start: int, length: int, mode: str) -> None:
        self.device.recorder.host_access(self._root.id, start, length, mode, self._who())

    def map_write(self, offset: int, data) -> None:
        try:
            src = memoryview(data).cast("B")
        except TypeError:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"data must be bytes-like, got {type(data).__name__}") from None
        if len(src) == 0:
            _int_arg(offset, "map_write offset")
            return
        store, start, length = self._map(MemoryAccess.DISCARD_WRITE, offset, len(src), "map_write")
        store[start:start + length] = src
        self._host_access(start, length, "w")

    def map_fill(self, offset: int, length: int, pattern: int, pattern_length: int) -> None:
        pat = check_pattern(pattern, pattern_length)
        if length == 0:
            _int_arg(offset, "map_fill offset")
            return
        store, start, length = self._map(MemoryAccess.DISCARD_WRITE, offset, length, "map_fill")
        if (start - self._offset) % pattern_length or length % pattern_length:
            raise HalError(
                StatusCode.INVALID_ARGUMENT,
                f"map_fill offset {start - self._offset} and length {length} must be multiples of "
                f"pattern_length {pattern_length}",
            )
        store[start:start + length] = pat * (length // pattern_length)
        self._host_access(start, length, "w")

    def map_zero(self, offset: int, length: int) -> None:
        self.map_fill(offset, length, 0, 1)

    def map_range(self, access: MemoryAccess = MemoryAccess.READ, offset: int = 0,
                  length: int = WHOLE_BUFFER) -> "Mapping":
        """A scoped mapping: ``.contents`` is a writable memoryview of the range; ``unmap()`` ends it."""
        if isinstance(access, bool) or not isinstance(access, int) or access < 0:
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"map_range access must be MemoryAccess flags, got {access!r}")
        access = MemoryAccess(access)
        store, start, length = self._map(access, offset, length, "map_range")
        # The mapping's whole range, at the map: what the host then does through it is not seen.
        writes = bool(access & (MemoryAccess.WRITE | MemoryAccess.DISCARD))
        self._host_access(start, length, "w" if writes else "r")
        contents = memoryview(store)[start:start + length]
        return Mapping(self, contents if writes else contents.toreadonly(), access)


class Mapping:
    """A scoped host mapping of a buffer range (IREE ``iree_hal_buffer_mapping_t``); a context manager.

    ``contents`` is a memoryview of the range, read-only unless the mapping's access allows writes.

    >>> from reference import hal
    >>> dev = hal.create_device("local-sync")
    >>> m = dev.allocator.allocate_buffer(16).map_range(hal.MemoryAccess.READ)
    >>> m.contents.readonly, m.invalidate()
    (True, None)
    >>> m.flush()
    Traceback (most recent call last):
    ...
    reference.hal.status.HalError: PERMISSION_DENIED: flush: buffer allows access <MemoryAccess.READ: 1>, operation needs <MemoryAccess.WRITE: 2>
    """

    __slots__ = ("buffer", "contents", "access")

    def __init__(self, buffer: Buffer, contents: memoryview, access: MemoryAccess = MemoryAccess.ALL):
        self.buffer = buffer
        self.contents = contents
        self.access = access

    def flush(self, offset: int = 0, length: int = WHOLE_BUFFER) -> None:
        """Publish host writes (IREE ``iree_hal_buffer_mapping_flush_range``: the mapping must allow
        WRITE; memory is coherent here, so only the access and the range are checked)."""
        validate_access(self.access, MemoryAccess.WRITE, "flush")
        calculate_range(len(self.contents), offset, length, "flush")

    def invalidate(self, offset: int = 0, length: int = WHOLE_BUFFER) -> None:
        """Make device writes visible to the host (``iree_hal_buffer_mapping_invalidate_range``: the
        mapping must allow READ; coherent here, so only the access and the range are checked)."""
        validate_access(self.access, MemoryAccess.READ, "invalidate")
        calculate_range(len(self.contents), offset, length, "invalidate")

    def unmap(self) -> None:
        self.contents.release()

    def __enter__(self) -> "Mapping":
        return self

    def __exit__(self, *exc) -> None:
        self.unmap()


def buffer_map_copy(source: Buffer, source_offset: int, target: Buffer, target_offset: int, length: int) -> None:
    """Host copy between two mappable buffers (IREE ``iree_hal_buffer_map_copy``)."""
    for name, b in (("source", source), ("target", target)):
        if not isinstance(b, Buffer):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{name} must be a Buffer, got {type(b).__name__}")
    if length == 0:
        _int_arg(source_offset, "map_copy source offset")
        _int_arg(target_offset, "map_copy target offset")
        return
    s_store, s_start, s_length = source._map(MemoryAccess.READ, source_offset, length, "map_copy source")
    t_store, t_start, t_length = target._map(MemoryAccess.DISCARD_WRITE, target_offset, length, "map_copy target")
    length = min(s_length, t_length)  # (equal unless WHOLE_BUFFER, which means the shorter of the two)
    if source._root is target._root and s_start < t_start + length and t_start < s_start + length:
        raise HalError(StatusCode.INVALID_ARGUMENT, "map_copy source and target ranges overlap")
    t_store[t_start:t_start + length] = s_store[s_start:s_start + length]
    source._host_access(s_start, length, "r")
    target._host_access(t_start, length, "w")


class BufferRef:
    """A reference to a buffer range: direct (``buffer``) or indirect (``slot`` into a binding table).

    >>> BufferRef(slot=1, offset=4, length=8)
    BufferRef(slot=1, offset=4, length=8)
    """

    __slots__ = ("buffer", "offset", "length", "slot")

    def __init__(self, buffer: Buffer | None = None, offset: int = 0, length: int = WHOLE_BUFFER,
                 slot: int | None = None):
        self.buffer = buffer
        self.offset = offset
        self.length = length
        self.slot = slot

    def __repr__(self) -> str:
        length = "WHOLE" if self.length == WHOLE_BUFFER else self.length
        head = f"slot={self.slot}" if self.slot is not None else f"buffer={self.buffer!r}"
        return f"BufferRef({head}, offset={self.offset}, length={length})"

    @property
    def is_indirect(self) -> bool:
        return self.slot is not None


class Range(NamedTuple):
    """A resolved byte range of an allocation: what executes and what the trace records."""

    buffer: Buffer  # the root allocation
    offset: int
    length: int

    def view(self, what: str = "buffer") -> memoryview:
        store = self.buffer.storage(what)
        return memoryview(store)[self.offset:self.offset + self.length]


def as_ref(value, what: str, device=None) -> BufferRef:
    """Accept a Buffer or a BufferRef wherever a BufferRef is taken; check the fields' types and, given
    ``device``, that a direct reference's buffer belongs to it (buffer ids are per device: another
    device's buffer would also be traced as the wrong one)."""
    if isinstance(value, Buffer):
        if device is not None and value.device is not device:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}: buffer {value.id} belongs to another device")
        return BufferRef(value)
    if not isinstance(value, BufferRef):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a Buffer or BufferRef, got {type(value).__name__}")
    _int_arg(value.offset, f"{what}.offset")
    _int_arg(value.length, f"{what}.length")
    if value.slot is not None:
        _int_arg(value.slot, f"{what}.slot")
        if value.buffer is not None:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} has both a buffer and a slot")
    elif not isinstance(value.buffer, Buffer):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} needs a buffer or a slot")
    elif device is not None and value.buffer.device is not device:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}: buffer {value.buffer.id} belongs to another device")
    return value


def resolve_direct(ref: BufferRef, what: str) -> Range:
    """Resolve a direct ref against its buffer (bounds checked: OUT_OF_RANGE)."""
    buf = ref.buffer
    offset, length = calculate_range(buf.byte_length, ref.offset, ref.length, what)
    return Range(buf._root, buf._offset + offset, length)


def resolve_binding(binding, ref: BufferRef, what: str) -> Range:
    """Resolve an indirect ref through a binding-table entry (HAL_SEMANTICS CB12)."""
    bref = binding if isinstance(binding, BufferRef) else BufferRef(binding)
    buf = bref.buffer
    b_off, b_len = calculate_range(buf.byte_length, bref.offset, bref.length, f"{what} binding")
    if ref.offset > b_len:
        raise HalError(StatusCode.OUT_OF_RANGE, f"{what} offset {ref.offset} past binding length {b_len}")
    length = b_len - ref.offset if ref.length == WHOLE_BUFFER else ref.length
    if ref.offset + length > b_len:
        raise HalError(
            StatusCode.OUT_OF_RANGE,
            f"{what} [{ref.offset}, {ref.offset + length}) past binding length {b_len}",
        )
    return Range(buf._root, buf._offset + b_off + ref.offset, length)
