"""Command buffers: recording with IREE's core validation, and resolution at submit
(HAL_SEMANTICS §A.5 CB1–CB16, §A.4 Q5).

Recording checks every rule that can be checked without the binding table and accumulates, per
binding-table slot, what the commands need of it (usage, access, memory type, compatibility, extent,
alignment). :meth:`CommandBuffer.resolve` checks a binding table against those needs and returns the
commands as :class:`Cmd` records over concrete byte ranges — the form every device executes and
traces. Binding tables are therefore copied at submit, as IREE requires.

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     buf = dev.allocator.allocate_buffer(16)
...     cb = dev.create_command_buffer(categories=hal.CommandCategory.TRANSFER)
...     cb.begin()
...     cb.fill_buffer(hal.BufferRef(buf, 4, 3), 7, 2)
Traceback (most recent call last):
...
reference.hal.status.HalError: INVALID_ARGUMENT: fill_buffer target length 3 is not a multiple of pattern_length 2
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from .buffer import (
    BufferRef,
    Range,
    as_ref,
    check_pattern,
    resolve_binding,
    resolve_direct,
    validate_access,
    validate_memory_type,
    validate_usage,
)
from .constants import (
    WHOLE_BUFFER,
    AccessScope,
    BufferCompatibility,
    BufferUsage,
    CommandBufferMode,
    CommandCategory,
    DispatchFlags,
    ExecutionStage,
    MemoryAccess,
    MemoryType,
)
from .event import Event
from .executable import Executable
from .status import HalError, StatusCode


class Commands(tuple):
    """A resolved command list (a tuple of :class:`Cmd`), as ``CommandBuffer.resolve`` returns it.

    A device may keep per-list execution state in ``device_state`` (the simulator keeps each
    command's duration and effect there); it lives exactly as long as the list, which a command
    buffer without indirect references keeps and hands out again on every submission.
    """

    device_state = None
    _buffers = None

    def buffers(self) -> tuple:
        """The root buffers the commands access, each once, in first-use order (what a submission
        retains); computed once per list."""
        if self._buffers is None:
            seen = {}
            for cmd in self:
                for rng, _ in cmd.accesses:
                    seen.setdefault(id(rng.buffer), rng.buffer)
            self._buffers = tuple(seen.values())
        return self._buffers


class Cmd(NamedTuple):
    """A resolved command: what executes and what the trace records.

    ``accesses`` lists ``(Range, "r" | "w" | "rw")``; ``args`` depends on ``kind``: fill → pattern
    bytes, update → source bytes, dispatch → (KernelSpec, workgroups tuple or Range, constants,
    binding Ranges), barrier → (source_stages, target_stages, barriers: ``(source_scope, target_scope[, Range | None])``
    each, empty when none were given).
    """

    index: int
    kind: str
    accesses: tuple
    args: object


class _Need:
    """What recorded commands require of one binding-table slot (IREE binding requirements)."""

    __slots__ = ("usage", "access", "memory_type", "compat", "max_end", "alignment")

    def __init__(self):
        self.usage = BufferUsage.NONE
        self.access = MemoryAccess.NONE
        self.memory_type = MemoryType.NONE
        self.compat = BufferCompatibility.NONE
        self.max_end = 0
        self.alignment = 1


class _Recorded(NamedTuple):
    kind: str
    refs: tuple  # ((BufferRef, access), ...)
    args: object


_ONE_SHOT = int(CommandBufferMode.ONE_SHOT)
_INLINE = int(CommandBufferMode.ALLOW_INLINE_EXECUTION)
_UNVALIDATED = int(CommandBufferMode.UNVALIDATED)
_ANY_CATEGORY = int(CommandCategory.ANY)


def _check_flags(value, enum_type, what):
    if type(value) is enum_type:  # already a member or combination (the internal callers' case)
        return value
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be {enum_type.__name__} flags, got {value!r}")
    return enum_type(value)


def _scopes(pair, what) -> tuple[int, int]:
    """A barrier's ``(source_scope, target_scope)`` as ints (INVALID_ARGUMENT naming a bad one)."""
    src, dst = pair
    return (int(_check_flags(src, AccessScope, f"{what} source_scope")),
            int(_check_flags(dst, AccessScope, f"{what} target_scope")))


class CommandBuffer:
    """Create with ``device.create_command_buffer(mode, categories, binding_capacity)``."""

    def __init__(self, device, cb_id: str, mode, categories, binding_capacity, queue_affinity):
        mode = _check_flags(mode, CommandBufferMode, "mode")
        categories = _check_flags(categories, CommandCategory, "categories")
        if isinstance(binding_capacity, bool) or not isinstance(binding_capacity, int) or binding_capacity < 0:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"binding_capacity must be an int >= 0, got {binding_capacity!r}")
        if not categories or int(categories) & ~_ANY_CATEGORY:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"categories must be TRANSFER, DISPATCH or ANY, got {categories!r}")
        if int(mode) & _INLINE:
            if not int(mode) & _ONE_SHOT:
                raise HalError(StatusCode.INVALID_ARGUMENT, "mode: inline command buffers must be one-shot")
            if binding_capacity > 0:
                raise HalError(StatusCode.INVALID_ARGUMENT, "binding_capacity: inline command buffers cannot have binding tables")
        self.device = device
        self.id = cb_id
        self.mode = mode
        self.allowed_categories = categories
        self.binding_capacity = binding_capacity
        self.queue_affinity = queue_affinity
        self.state = "initial"  # initial → recording → executable; "submitted" after a one-shot submit
        self._commands: list[_Recorded] = []
        self._needs: dict[int, _Need] = {}
        self._validated = not int(mode) & _UNVALIDATED
        # (command count, resolved commands) of a cb without indirect refs: its resolution never
        # changes, and reusable command buffers are submitted over and over.
        self._direct_resolution: tuple[int, tuple] | None = None
        self.submit_fields: dict | None = None  # the trace fields of its queue_execute ops (Device)

    def __repr__(self) -> str:
        return f"<CommandBuffer {self.id} {self.state} {len(self._commands)} commands>"

    __hash__ = object.__hash__

    @property
    def command_count(self) -> int:
        return len(self._commands)

    @property
    def binding_count(self) -> int:
        return max(self._needs) + 1 if self._needs else 0

    # -- lifecycle ---------------------------------------------------------------------------------

    def begin(self) -> None:
        if self._validated and self.state != "initial":
            raise HalError(StatusCode.FAILED_PRECONDITION, f"command buffer {self.id} has already been recorded; "
                           "re-recording command buffers is not allowed")
        self.state = "recording"

    def end(self) -> None:
        if self._validated and self.state != "recording":
            raise HalError(StatusCode.FAILED_PRECONDITION, f"command buffer {self.id} is not in a recording state")
        self.state = "executable"

    def _recording(self, required: CommandCategory, op: str) -> None:
        if not self._validated:
            return
        if self.state != "recording":
            raise HalError(StatusCode.FAILED_PRECONDITION, f"{op}: command buffer {self.id} is not in a recording state")
        r = int(required)
        if (int(self.allowed_categories) & r) != r:
            raise HalError(StatusCode.FAILED_PRECONDITION, f"{op}: operation requires categories {required!r} "
                           f"but command buffer only supports {self.allowed_categories!r}")

    # -- reference validation ----------------------------------------------------------------------

    def _check_ref(self, ref: BufferRef, what: str, usage, access, compat, alignment=1,
                   memory_type=MemoryType.DEVICE_VISIBLE) -> None:
        """Direct refs: check the buffer now. Indirect refs: record the slot's needs for submit."""
        if ref.is_indirect:
            if ref.slot >= self.binding_capacity:
                raise HalError(StatusCode.OUT_OF_RANGE, f"{what}.slot {ref.slot} >= binding_capacity {self.binding_capacity}")
            if not self._validated:
                return
            need = self._needs.setdefault(ref.slot, _Need())
            need.usage |= usage
            need.access |= access
            need.memory_type |= memory_type
            need.compat |= compat
            if ref.length != WHOLE_BUFFER:
                need.max_end = max(need.max_end, ref.offset + ref.length)
            need.alignment = math.lcm(need.alignment, alignment)
            return
        resolve_direct(ref, what)
        if self._validated:
            check_binding(ref.buffer, what, usage, access, memory_type, compat)

    # -- commands ----------------------------------------------------------------------------------

    def execution_barrier(self, source_stages, target_stages, memory_barriers=(), buffer_barriers=()) -> None:
        """Record a barrier. ``memory_barriers``: ``(source_scope, target_scope)`` pairs;
        ``buffer_barriers``: ``(source_scope, target_scope, BufferRef)`` (``AccessScope`` flags).
        Resolved as ``(source_stages, target_stages, barriers)``: each barrier's ``(source, target)``
        scopes plus, for a buffer barrier, its ``Range`` (resolved at submit like every command's
        refs, a binding-table slot's through the table) — what ``halsim check`` needs to see which
        accesses it makes visible (docs/checks.md)."""
        self._recording(CommandCategory.NONE, "execution_barrier")
        source_stages = _check_flags(source_stages, ExecutionStage, "source_stages")
        target_stages = _check_flags(target_stages, ExecutionStage, "target_stages")
        memory_barriers = _sequence(memory_barriers or (), "memory_barriers")  # (None: none, as before)
        buffer_barriers = _sequence(buffer_barriers or (), "buffer_barriers")
        barriers = []
        for i, mb in enumerate(memory_barriers):
            if not isinstance(mb, (tuple, list)) or len(mb) != 2:
                raise HalError(StatusCode.INVALID_ARGUMENT,
                               f"memory_barriers[{i}] must be (source_scope, target_scope), got {mb!r}")
            barriers.append(_scopes(mb, f"memory_barriers[{i}]"))
        refs = []
        for i, bb in enumerate(buffer_barriers):
            try:
                src, dst, ref = bb
            except (TypeError, ValueError):
                raise HalError(StatusCode.INVALID_ARGUMENT,
                               f"buffer_barriers[{i}] must be (source_scope, target_scope, BufferRef)") from None
            what = f"buffer_barriers[{i}]"
            refs.append((as_ref(ref, what, self.device), ""))
            barriers.append(_scopes((src, dst), what))  # (its Range joins it when resolved: _resolved)
        self._commands.append(_Recorded("barrier", tuple(refs), (source_stages, target_stages, tuple(barriers))))

    def signal_event(self, event: Event, source_stages) -> None:
        self._event_command("signal_event", (event,), source_stages, source_stages)

    def reset_event(self, event: Event, source_stages) -> None:
        self._event_command("reset_event", (event,), source_stages, source_stages)

    def wait_events(self, events: Sequence[Event], source_stages, target_stages) -> None:
        self._event_command("wait_events", _sequence(events, "wait_events: events"), source_stages, target_stages)

    def _event_command(self, kind, events, source_stages, target_stages):
        self._recording(CommandCategory.DISPATCH, kind)
        for i, e in enumerate(events):
            if not isinstance(e, Event):
                raise HalError(StatusCode.INVALID_ARGUMENT, f"{kind}: events[{i}] must be an Event, got {type(e).__name__}")
            if e.device is not self.device:
                raise HalError(StatusCode.INVALID_ARGUMENT, f"{kind}: events[{i}] ({e.id}) belongs to another device")
        _check_flags(source_stages, ExecutionStage, "source_stages")
        _check_flags(target_stages, ExecutionStage, "target_stages")
        self._commands.append(_Recorded(kind, (), tuple(e.id for e in events)))

    def fill_buffer(self, target, pattern: int, pattern_length: int) -> None:
        self._recording(CommandCategory.TRANSFER, "fill_buffer")
        target = as_ref(target, "target", self.device)
        if target.length == 0:
            return
        if not self._validated:
            # UNVALIDATED skips CB6, so the pattern is checked where IREE's backend would meet it: when
            # the command is resolved at submit (_resolved), never as a Python error.
            self._check_ref(target, "fill_buffer target", BufferUsage.TRANSFER_TARGET, MemoryAccess.WRITE,
                            BufferCompatibility.QUEUE_TRANSFER)
            self._commands.append(_Recorded("fill", ((target, "w"),), (pattern, pattern_length)))
            return
        pat = check_pattern(pattern, pattern_length)
        length = target.length
        if not target.is_indirect:
            length = resolve_direct(target, "fill_buffer target").length
        if target.offset % pattern_length:
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"fill_buffer target offset {target.offset} is not a multiple of pattern_length {pattern_length}")
        if length != WHOLE_BUFFER and length % pattern_length:
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"fill_buffer target length {length} is not a multiple of pattern_length {pattern_length}")
        self._check_ref(target, "fill_buffer target", BufferUsage.TRANSFER_TARGET, MemoryAccess.WRITE,
                        BufferCompatibility.QUEUE_TRANSFER, alignment=pattern_length)
        self._commands.append(_Recorded("fill", ((target, "w"),), pat))

    def update_buffer(self, source, source_offset: int, target) -> None:
        self._recording(CommandCategory.TRANSFER, "update_buffer")
        try:
            data = bytes(memoryview(source).cast("B"))
        except TypeError:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"source must be bytes-like, got {type(source).__name__}") from None
        if isinstance(source_offset, bool) or not isinstance(source_offset, int) or source_offset < 0:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"source_offset must be an int >= 0, got {source_offset!r}")
        target = as_ref(target, "target", self.device)
        if target.length == 0:
            return
        if source_offset > len(data):  # (a WHOLE_BUFFER length would come out negative)
            raise HalError(StatusCode.OUT_OF_RANGE, f"update_buffer source_offset {source_offset} past source "
                           f"length {len(data)}")
        if target.is_indirect:
            length = len(data) - source_offset if target.length == WHOLE_BUFFER else target.length
            target = BufferRef(offset=target.offset, length=length, slot=target.slot)
        else:
            length = resolve_direct(target, "update_buffer target").length
        if source_offset + length > len(data):
            raise HalError(StatusCode.OUT_OF_RANGE, f"update_buffer source [{source_offset}, {source_offset + length}) "
                           f"past source length {len(data)}")
        self._check_ref(target, "update_buffer target", BufferUsage.TRANSFER_TARGET, MemoryAccess.WRITE,
                        BufferCompatibility.QUEUE_TRANSFER)
        # Capture the host bytes now: the caller may reuse its memory as soon as we return.
        self._commands.append(_Recorded("update", ((target, "w"),), data[source_offset:source_offset + length]))

    def copy_buffer(self, source, target) -> None:
        self._recording(CommandCategory.TRANSFER, "copy_buffer")
        source = as_ref(source, "source", self.device)
        target = as_ref(target, "target", self.device)
        if target.length == 0:
            return
        if self._validated:
            s_len = source.length if source.is_indirect else resolve_direct(source, "copy_buffer source").length
            t_len = target.length if target.is_indirect else resolve_direct(target, "copy_buffer target").length
            if WHOLE_BUFFER not in (s_len, t_len) and s_len != t_len:
                raise HalError(StatusCode.INVALID_ARGUMENT,
                               f"copy_buffer source length {s_len} != target length {t_len}")
            if not source.is_indirect and not target.is_indirect:
                s = resolve_direct(source, "copy_buffer source")
                t = resolve_direct(target, "copy_buffer target")
                if _overlap(s, t):
                    raise HalError(StatusCode.INVALID_ARGUMENT, "copy_buffer source and target ranges overlap "
                                   f"in allocation {s.buffer.id}")
        self._check_ref(source, "copy_buffer source", BufferUsage.TRANSFER_SOURCE, MemoryAccess.READ,
                        BufferCompatibility.QUEUE_TRANSFER)
        self._check_ref(target, "copy_buffer target", BufferUsage.TRANSFER_TARGET, MemoryAccess.WRITE,
                        BufferCompatibility.QUEUE_TRANSFER)
        self._commands.append(_Recorded("copy", ((source, "r"), (target, "w")), None))

    def dispatch(self, executable: Executable, entry_point, workgroups, constants=(), bindings=(),
                 flags=DispatchFlags.NONE) -> None:
        """Record a dispatch. ``workgroups`` is ``(x, y, z)`` or a BufferRef to three u32 counts read
        when the dispatch runs (indirect parameters)."""
        self._recording(CommandCategory.DISPATCH, "dispatch")
        cmd = check_dispatch(executable, entry_point, workgroups, constants, bindings, flags, self.device)
        if cmd is None:
            return
        spec, wg, consts, refs = cmd
        if isinstance(wg, BufferRef):
            self._check_ref(wg, "dispatch workgroups", BufferUsage.DISPATCH_INDIRECT_PARAMETERS, MemoryAccess.READ,
                            BufferCompatibility.NONE, alignment=4)
        for i, ref in enumerate(refs):
            self._check_ref(ref, f"dispatch bindings[{i}]", BufferUsage.DISPATCH_STORAGE, MemoryAccess.ANY,
                            BufferCompatibility.QUEUE_DISPATCH)
        all_refs = tuple((ref, spec.bindings[i].access) for i, ref in enumerate(refs))
        if isinstance(wg, BufferRef):
            all_refs += ((wg, "r"),)
        self._commands.append(_Recorded("dispatch", all_refs, (spec, wg, consts)))

    # -- submission --------------------------------------------------------------------------------

    def resolve(self, binding_table=None) -> tuple[Cmd, ...]:
        """Check the cb can be submitted with ``binding_table`` and return its resolved commands."""
        if self._validated:
            if self.state == "initial":
                raise HalError(StatusCode.FAILED_PRECONDITION, f"command buffer {self.id} has not been recorded")
            if self.state == "recording":
                raise HalError(StatusCode.FAILED_PRECONDITION, f"command buffer {self.id} has not ended recording")
            if self.state == "submitted":
                raise HalError(StatusCode.FAILED_PRECONDITION,
                               f"command buffer {self.id} is ONE_SHOT and was already submitted")
        table = self._check_table(binding_table)
        cached = self._direct_resolution
        if cached is not None and cached[0] == len(self._commands):
            return cached[1]
        out = []
        direct = True
        for index, rec in enumerate(self._commands):
            ranges = []
            for ref, access in rec.refs:
                what = f"command {index} ({rec.kind})"
                if ref.is_indirect:
                    direct = False
                    if table is None or ref.slot >= len(table) or table[ref.slot] is None:
                        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}: binding table has no buffer at slot {ref.slot}")
                    ranges.append((resolve_binding(table[ref.slot], ref, what), access))
                else:
                    ranges.append((resolve_direct(ref, what), access))
            out.append(_resolved(index, rec, ranges))
        out = Commands(out)
        if direct and self.state == "executable":
            self._direct_resolution = (len(self._commands), out)
        return out

    def mark_submitted(self) -> None:
        if int(self.mode) & _ONE_SHOT and self._validated:  # int(): IntFlag's & costs a microsecond
            self.state = "submitted"

    def _check_table(self, binding_table):
        table = None
        if binding_table is not None:
            try:
                raw = tuple(binding_table)
            except TypeError:
                raise HalError(StatusCode.INVALID_ARGUMENT, "binding_table must be a sequence of Buffer/BufferRef") from None
            table = []
            for i, entry in enumerate(raw):
                if entry is None or (isinstance(entry, BufferRef) and entry.buffer is None and entry.slot is None):
                    table.append(None)
                    continue
                ref = as_ref(entry, f"binding_table[{i}]", self.device)
                if ref.is_indirect:
                    raise HalError(StatusCode.INVALID_ARGUMENT, f"binding_table[{i}] must reference a buffer, not a slot")
                table.append(ref)
            table = tuple(table)
        if not self._validated or not self._needs:
            return table
        count = self.binding_count
        if not table:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"command buffer {self.id} uses {count} binding slot(s) "
                           "but no binding_table was given")
        if len(table) < count:
            raise HalError(StatusCode.OUT_OF_RANGE, f"binding_table has {len(table)} entries, command buffer "
                           f"{self.id} uses {count}")
        for slot in sorted(self._needs):
            need = self._needs[slot]
            entry = table[slot]
            what = f"binding_table[{slot}]"
            if entry is None:
                raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} has no buffer")
            buf = entry.buffer
            check_binding(buf, what, need.usage, need.access, need.memory_type, need.compat)
            b_off = entry.offset
            b_len = buf.byte_length - b_off if entry.length == WHOLE_BUFFER else entry.length
            if need.max_end > b_len:
                raise HalError(StatusCode.OUT_OF_RANGE, f"{what}: commands use [0, {need.max_end}) of a binding "
                               f"of length {b_len}")
            if b_off % need.alignment:  # (CB13: the binding's offset, not where its buffer starts)
                raise HalError(StatusCode.INVALID_ARGUMENT, f"{what}: offset {b_off} not aligned to {need.alignment}")
        return table


def check_binding(buf, what, usage, access, memory_type, compat) -> None:
    """IREE ``iree_hal_command_buffer_validate_buffer_requirements`` order (CB13)."""
    c = int(compat)
    if (int(buf.compatibility) & c) != c:
        raise HalError(StatusCode.PERMISSION_DENIED, f"{what}: buffer {buf.id} lacks {compat!r} compatibility "
                       "(queue use needs a DEVICE_VISIBLE memory type and a matching usage at allocation)")
    validate_usage(buf.allowed_usage, usage, what)
    if access:
        validate_access(buf.allowed_access, access, what)
    validate_memory_type(buf.memory_type, memory_type, what)


def check_dispatch(executable, entry_point, workgroups, constants, bindings, flags, device):
    """Shared by ``CommandBuffer.dispatch`` and ``queue_dispatch``: None for a no-op dispatch."""
    flags = _check_flags(flags, DispatchFlags, "flags")
    if flags & (DispatchFlags.DYNAMIC_INDIRECT_ARGUMENTS | DispatchFlags.STATIC_INDIRECT_ARGUMENTS):
        count = len(_sequence(bindings, "bindings"))
        if count != 1:
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"flags: indirect arguments need exactly one binding, got {count}")
        raise HalError(StatusCode.UNIMPLEMENTED, "flags: indirect arguments are not supported by the builtin kernels")
    if isinstance(workgroups, BufferRef) or (hasattr(workgroups, "byte_length")):
        wg = as_ref(workgroups, "workgroups", device)
        if wg.offset % 4:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"workgroups (indirect) offset {wg.offset} is not 4-byte aligned")
        # IREE [H] skips the check for WHOLE_BUFFER; the resolved length is checked instead: here for a
        # direct ref, at submit (_resolved) for a binding-table one.
        length = wg.length if wg.is_indirect else resolve_direct(wg, "workgroups (indirect)").length
        if length != WHOLE_BUFFER and length < 12:
            raise HalError(StatusCode.OUT_OF_RANGE, f"workgroups (indirect) length {length} < 12 bytes")
    else:
        try:
            wg = tuple(workgroups)
        except TypeError:
            wg = ()
        if len(wg) != 3 or any(isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 0xFFFFFFFF for v in wg):
            # (uint32_t workgroup_count[3] in IREE: a larger count is no count it can be given)
            raise HalError(StatusCode.INVALID_ARGUMENT,
                           f"workgroups must be (x, y, z) ints in [0, 2**32) or a BufferRef, got {workgroups!r}")
        if 0 in wg:
            return None  # a dispatch of no workgroups is a no-op; validation is skipped (IREE)
    if not isinstance(executable, Executable):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"executable must be an Executable, got {type(executable).__name__}")
    if executable.device is not device:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"executable {executable.id} belongs to another device")
    spec = executable.kernel(executable.resolve(entry_point))
    if isinstance(constants, (bytes, bytearray, memoryview)):
        raw = bytes(constants)
        if len(raw) % 4:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"constants length {len(raw)} is not a multiple of 4 bytes")
        constants = tuple(int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4))
    consts = _sequence(constants, "constants")
    for i, c in enumerate(consts):
        if isinstance(c, bool) or not isinstance(c, int) or not -(2**31) <= c < 2**32:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"constants[{i}] must be a 32-bit int, got {c!r}")
    if len(consts) != spec.constant_count:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{spec.name} takes {spec.constant_count} constants, got {len(consts)}")
    refs = tuple(as_ref(b, f"bindings[{i}]", device) for i, b in enumerate(_sequence(bindings, "bindings")))
    if len(refs) != spec.binding_count:
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{spec.name} takes {spec.binding_count} bindings, got {len(refs)}")
    return spec, wg, consts, refs


def _sequence(value, what: str) -> tuple:
    """A sequence argument as a tuple (INVALID_ARGUMENT naming it for None, an int, …)."""
    if type(value) is tuple:
        return value
    if isinstance(value, (str, bytes, dict, set)) or not hasattr(value, "__iter__"):
        raise HalError(StatusCode.INVALID_ARGUMENT, f"{what} must be a sequence, got {type(value).__name__}")
    return tuple(value)


def _overlap(a: Range, b: Range) -> bool:
    return a.buffer is b.buffer and a.offset < b.offset + b.length and b.offset < a.offset + a.length


def _resolved(index: int, rec: _Recorded, ranges) -> Cmd:
    accesses = tuple((r, a) for r, a in ranges if a)
    if rec.kind == "barrier" and ranges:  # each buffer barrier (after the memory ones) gets its Range
        source, target, barriers = rec.args
        k = len(barriers) - len(ranges)
        barriers = barriers[:k] + tuple(b + (r,) for b, (r, _) in zip(barriers[k:], ranges))
        return Cmd(index, "barrier", accesses, (source, target, barriers))
    if rec.kind == "dispatch":
        spec, wg, consts = rec.args
        n = spec.binding_count
        bind_ranges = tuple(r for r, _ in ranges[:n])
        wg_value = wg
        if isinstance(wg, BufferRef):
            wg_value = ranges[n][0]
            if wg_value.length < 12:  # a WHOLE_BUFFER or binding-table ref is only known here (CB11)
                raise HalError(StatusCode.OUT_OF_RANGE, f"command {index} (dispatch): workgroups (indirect) "
                               f"length {wg_value.length} < 12 bytes")
        return Cmd(index, "dispatch", accesses, (spec, wg_value, consts, bind_ranges))
    if rec.kind == "copy":
        if ranges[0][0].length != ranges[1][0].length:
            raise HalError(StatusCode.INVALID_ARGUMENT, f"command {index} (copy): source length "
                           f"{ranges[0][0].length} != target length {ranges[1][0].length}")
    if rec.kind == "fill":
        if type(rec.args) is tuple:  # recorded UNVALIDATED: (pattern, pattern_length), checked now
            try:
                rec = rec._replace(args=check_pattern(*rec.args))
            except HalError as e:
                raise HalError(e.code, f"command {index} (fill): {e.message}") from None
        t = ranges[0][0]
        if t.length % len(rec.args):
            raise HalError(StatusCode.INVALID_ARGUMENT, f"command {index} (fill): length {t.length} is not a "
                           f"multiple of pattern_length {len(rec.args)}")
    if rec.kind == "update" and ranges[0][0].length != len(rec.args):
        raise HalError(StatusCode.OUT_OF_RANGE, f"command {index} (update): target length "
                       f"{ranges[0][0].length} != source bytes {len(rec.args)}")
    return Cmd(index, rec.kind, accesses, rec.args)
