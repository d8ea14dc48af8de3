"""Metal command segments: how a resolved HAL command list is encoded into Metal encoders.

Metal records commands through *encoders* — a blit encoder for fills and copies, a compute encoder for
dispatches — and has no 1:1 mapping for HAL barriers, so IREE's Metal driver records a command buffer as
a list of deferred *segments* and encodes them only once the whole list is known
(``runtime/src/iree/hal/drivers/metal/direct_command_buffer.m``; HAL_SEMANTICS §B.5). This module is that
encoding decision as a pure function, :func:`plan_segments`, shared by the simulator (which charges the
encoder switches and lets dispatches of one compute encoder overlap) and by ``real_backends.metal``
(which issues the calls). The rules, as IREE's driver applies them:

* **fill** goes to a blit encoder (``fillBuffer:range:value:``) when the pattern is one repeated byte
  (``fillBuffer`` takes a single byte) and, on macOS, offset and length are multiples of 4; otherwise it
  is the builtin compute kernel ``fill_buffer_generic`` (pattern widened to 4 bytes).
* **copy** goes to a blit encoder (``copyFromBuffer:…``) when, on macOS, both offsets and the length are
  multiples of 4; otherwise the builtin compute kernel ``copy_buffer_generic``.
* **update** stages the host bytes into a shared staging buffer at a 4-byte aligned offset and becomes a
  copy from it, so only the target offset and the length decide blit vs compute.
* **dispatch** goes to a compute encoder (``dispatchThreadgroups``, or
  ``dispatchThreadgroupsWithIndirectBuffer`` when the workgroup count is read from a buffer).
* Needing the other kind of encoder than the open one ends it and synchronizes through the command
  buffer's one ``MTLEvent``: signal then wait the next event value (an :class:`EncoderEvent`, reason
  ``"switch"``). Opening an encoder when none is open needs no event.
* An **execution barrier** with no memory or buffer barriers ends the open encoder and signals and waits
  the event at a new value (reason ``"barrier"``) — even when no encoder is open, as IREE does.
* A barrier **with** memory or buffer barriers is ``memoryBarrierWithScope:`` inside a compute encoder
  (opening one, switching from blit if needed). The resolved command form (``reference.hal.Cmd``) does not
  keep which of the two kinds it had, so both are planned as the scope barrier.
* Commands of one compute encoder between memory barriers may run concurrently (the encoder is created
  with ``MTLDispatchTypeConcurrent``); blit commands, and compute commands of a serial-dispatch
  encoder, run one after another. :meth:`Encoder.groups` gives those runs.
* A barrier involving the HOST stage, and the event commands, are UNIMPLEMENTED on Metal.

>>> from reference import hal
>>> with hal.create_device("local-sync") as dev:
...     exe = dev.load_executable()
...     buf = dev.allocator.allocate_buffer(64)
...     cb = dev.create_command_buffer()
...     cb.begin()
...     cb.fill_buffer(hal.BufferRef(buf, 0, 16), 0xAB, 1)       # one byte, aligned: blit
...     cb.fill_buffer(hal.BufferRef(buf, 16, 16), 0x1234, 2)    # two different bytes: compute kernel
...     cb.dispatch(exe, "negate", (1, 1, 1), (), (hal.BufferRef(buf, 32, 16), hal.BufferRef(buf, 48, 16)))
...     cb.execution_barrier(hal.ExecutionStage.DISPATCH, hal.ExecutionStage.TRANSFER)
...     cb.copy_buffer(hal.BufferRef(buf, 48, 16), hal.BufferRef(buf, 0, 16))
...     cb.end()
...     print(describe(plan_segments(cb.resolve())))
blit: 0 fillBuffer
event 1: encoder switch
compute: 1 fill_buffer_generic, 2 dispatchThreadgroups
event 2: execution barrier (command 3)
blit: 4 copyFromBuffer
"""

from __future__ import annotations

from typing import Iterable, NamedTuple, Union

from reference.hal import ExecutionStage, HalError, Range, StatusCode

BLIT, COMPUTE = "blit", "compute"


class MetalFacts(NamedTuple):
    """What the plan depends on about the device.

    ``blit_alignment``: the byte alignment the blit encoder needs of offsets and lengths (4 on macOS,
    1 on iOS/tvOS). ``concurrent``: compute encoders use ``MTLDispatchTypeConcurrent`` (IREE's default)
    rather than serial dispatch."""

    blit_alignment: int = 4
    concurrent: bool = True


MACOS = MetalFacts(blit_alignment=4)
IOS = MetalFacts(blit_alignment=1)


class Step(NamedTuple):
    """One HAL command placed in an encoder: its index in the command list, its HAL kind, and the
    Metal call that encodes it."""

    index: int
    kind: str
    method: str

    @property
    def is_memory_barrier(self) -> bool:
        return self.kind == "barrier"


class Encoder(NamedTuple):
    """One blit or compute encoder and the steps encoded into it, in order."""

    kind: str
    steps: tuple[Step, ...]
    concurrent: bool = True

    def groups(self) -> tuple[tuple[Step, ...], ...]:
        """Runs of steps that may execute at the same time, in order. A memory barrier is a run of
        its own (everything before it finishes first); blit encoders and serial compute encoders run
        one step at a time."""
        if self.kind == BLIT or not self.concurrent:
            return tuple((s,) for s in self.steps)
        out: list[tuple[Step, ...]] = []
        run: list[Step] = []
        for step in self.steps:
            if step.is_memory_barrier:
                if run:
                    out.append(tuple(run))
                    run = []
                out.append((step,))
            else:
                run.append(step)
        if run:
            out.append(tuple(run))
        return tuple(out)


class EncoderEvent(NamedTuple):
    """The command buffer's encoder ``MTLEvent`` signaled and waited at ``value`` between encoders:
    ``reason`` is ``"switch"`` (blit ↔ compute) or ``"barrier"`` (the execution barrier at ``index``)."""

    value: int
    reason: str
    index: int | None = None


Segment = Union[Encoder, EncoderEvent]


def repeated_byte(pattern: bytes) -> int | None:
    """The byte a fill pattern repeats, or None when its bytes differ (``fillBuffer`` takes one byte).

    >>> repeated_byte(b"\\xab"), repeated_byte(b"\\x11\\x11\\x11\\x11"), repeated_byte(b"\\x34\\x12")
    (171, 17, None)
    """
    if pattern and pattern.count(pattern[0]) == len(pattern):
        return pattern[0]
    return None


def _aligned(alignment: int, *values: int) -> bool:
    return all(v % alignment == 0 for v in values)


def _place(cmd, facts: MetalFacts) -> tuple[str, str]:
    """(encoder kind, Metal method) for one non-barrier command."""
    kind = cmd.kind
    a = facts.blit_alignment
    if kind == "fill":
        target = cmd.accesses[0][0]
        if repeated_byte(bytes(cmd.args)) is not None and _aligned(a, target.offset, target.length):
            return BLIT, "fillBuffer"
        return COMPUTE, "fill_buffer_generic"
    if kind == "copy":
        source, target = cmd.accesses[0][0], cmd.accesses[1][0]
        if _aligned(a, source.offset, target.offset, target.length):
            return BLIT, "copyFromBuffer"
        return COMPUTE, "copy_buffer_generic"
    if kind == "update":
        # Staged at a 4-byte aligned offset of the staging buffer, then copied like a copy.
        target = cmd.accesses[0][0]
        if _aligned(a, target.offset, target.length):
            return BLIT, "copyFromBuffer"
        return COMPUTE, "copy_buffer_generic"
    if kind == "dispatch":
        indirect = isinstance(cmd.args[1], Range)
        return COMPUTE, "dispatchThreadgroupsWithIndirectBuffer" if indirect else "dispatchThreadgroups"
    if kind in ("signal_event", "reset_event", "wait_events"):
        raise HalError(StatusCode.UNIMPLEMENTED, f"command {cmd.index} ({kind}): Metal does not implement HAL events")
    raise HalError(StatusCode.INVALID_ARGUMENT, f"command {cmd.index}: unknown command kind {kind!r}")


def check_barrier(source_stages, target_stages, index=None) -> None:
    """UNIMPLEMENTED for a barrier involving the HOST stage (IREE's Metal driver does not support it)."""
    if (int(source_stages) | int(target_stages)) & ExecutionStage.HOST:
        where = "execution_barrier" if index is None else f"command {index} (barrier)"
        raise HalError(StatusCode.UNIMPLEMENTED, f"{where}: barriers involving the HOST stage are not "
                       "supported by Metal")


def plan_segments(commands: Iterable, facts: MetalFacts = MACOS) -> tuple[Segment, ...]:
    """The encoders and encoder events of a resolved command list (``reference.hal.Cmd`` records, as
    ``CommandBuffer.resolve`` returns them), in encoding order. Raises UNIMPLEMENTED for event commands
    and HOST-stage barriers, INVALID_ARGUMENT for a command kind it does not know."""
    out: list[Segment] = []
    open_kind: str | None = None
    steps: list[Step] = []
    next_value = 1

    def end_encoder() -> None:
        nonlocal open_kind, steps
        if open_kind is not None:
            out.append(Encoder(open_kind, tuple(steps), facts.concurrent))
        open_kind, steps = None, []

    def event(reason: str, index: int | None) -> None:
        nonlocal next_value
        out.append(EncoderEvent(next_value, reason, index))
        next_value += 1

    def use(kind: str) -> None:
        nonlocal open_kind
        if open_kind == kind:
            return
        if open_kind is not None:  # the other kind is open: end it and synchronize through the event
            end_encoder()
            event("switch", None)
        open_kind = kind

    for cmd in commands:
        if cmd.kind == "barrier":
            source_stages, target_stages, memory_barriers = cmd.args  # (memory and buffer barriers' scopes)
            check_barrier(source_stages, target_stages, cmd.index)
            if memory_barriers:
                use(COMPUTE)
                steps.append(Step(cmd.index, "barrier", "memoryBarrierWithScope"))
            else:
                end_encoder()
                event("barrier", cmd.index)
            continue
        kind, method = _place(cmd, facts)
        use(kind)
        steps.append(Step(cmd.index, cmd.kind, method))
    end_encoder()
    return tuple(out)


def describe(plan: Iterable[Segment]) -> str:
    """One line per encoder or encoder event; in an encoder, steps that may run concurrently are joined
    by ``,`` and consecutive runs by ``|``."""
    lines = []
    for seg in plan:
        if isinstance(seg, EncoderEvent):
            what = "encoder switch" if seg.reason == "switch" else f"execution barrier (command {seg.index})"
            lines.append(f"event {seg.value}: {what}")
        else:
            runs = (", ".join(f"{s.index} {s.method}" for s in group) for group in seg.groups())
            lines.append(f"{seg.kind}: {' | '.join(runs)}")
    return "\n".join(lines)
