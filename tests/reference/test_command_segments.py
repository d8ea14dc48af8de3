"""The Metal command-segment planner and storage-mode mapping (reference.utils): exact plans."""

import pytest

from reference import hal
from reference.hal import Cmd, Range
from reference.utils import (
    BLIT,
    COMPUTE,
    IOS,
    MACOS,
    Encoder,
    EncoderEvent,
    MetalFacts,
    Step,
    compatible_memory_type,
    describe,
    plan_segments,
    repeated_byte,
    resource_options,
)

S = hal.StatusCode
STAGE = hal.ExecutionStage
MT = hal.MemoryType
MEMORY_BARRIER = [(hal.AccessScope.DISPATCH_WRITE, hal.AccessScope.DISPATCH_READ)]


@pytest.fixture
def dev():
    d = hal.create_device("local-sync")
    yield d
    d.close()


@pytest.fixture
def buf(dev):
    usage = hal.BufferUsage.DEFAULT | hal.BufferUsage.DISPATCH_INDIRECT_PARAMETERS
    return dev.allocator.allocate_buffer(4096, usage=usage)


def resolve(dev, record):
    cb = dev.create_command_buffer()
    cb.begin()
    record(cb, dev.load_executable())
    cb.end()
    return cb.resolve()


def ref(buf, offset, length):
    return hal.BufferRef(buf, offset, length)


def dispatch(cb, exe, buf, at=0):
    cb.dispatch(exe, "negate", (1, 1, 1), (), (ref(buf, at, 16), ref(buf, at + 16, 16)))


def blit(*steps):
    return Encoder(BLIT, tuple(Step(*s) for s in steps))


def compute(*steps, concurrent=True):
    return Encoder(COMPUTE, tuple(Step(*s) for s in steps), concurrent)


D = "dispatchThreadgroups"


# -- fill, copy, update: blit or compute -----------------------------------------------------------

@pytest.mark.parametrize("offset, length, pattern, plen, facts, expect", [
    (0, 16, 0xAB, 1, MACOS, (BLIT, "fillBuffer")),
    (4, 8, 0x11111111, 4, MACOS, (BLIT, "fillBuffer")),          # a repeated byte in a 4-byte pattern
    (0, 16, 0xABAB, 2, MACOS, (BLIT, "fillBuffer")),
    (0, 16, 0x1234, 2, MACOS, (COMPUTE, "fill_buffer_generic")),  # two different bytes
    (0, 16, 0xDEADCAFE, 4, MACOS, (COMPUTE, "fill_buffer_generic")),
    (3, 8, 0xAB, 1, MACOS, (COMPUTE, "fill_buffer_generic")),     # macOS: offset not a multiple of 4
    (0, 7, 0xAB, 1, MACOS, (COMPUTE, "fill_buffer_generic")),     # macOS: length not a multiple of 4
    (3, 7, 0xAB, 1, IOS, (BLIT, "fillBuffer")),                   # iOS: any byte alignment
    (2, 6, 0x1234, 2, IOS, (COMPUTE, "fill_buffer_generic")),
])
def test_fill_goes_to_blit_only_for_one_repeated_byte_and_aligned_range(dev, buf, offset, length, pattern, plen,
                                                                      facts, expect):
    cmds = resolve(dev, lambda cb, exe: cb.fill_buffer(ref(buf, offset, length), pattern, plen))
    assert plan_segments(cmds, facts) == (Encoder(expect[0], (Step(0, "fill", expect[1]),), facts.concurrent),)


@pytest.mark.parametrize("src, dst, length, facts, expect", [
    (0, 64, 16, MACOS, (BLIT, "copyFromBuffer")),
    (8, 128, 4, MACOS, (BLIT, "copyFromBuffer")),
    (1, 66, 16, MACOS, (COMPUTE, "copy_buffer_generic")),   # byte-misaligned source and target
    (0, 64, 31, MACOS, (COMPUTE, "copy_buffer_generic")),   # length
    (4, 66, 16, MACOS, (COMPUTE, "copy_buffer_generic")),   # target only
    (1, 66, 31, IOS, (BLIT, "copyFromBuffer")),
])
def test_copy_goes_to_blit_when_offsets_and_length_are_aligned(dev, buf, src, dst, length, facts, expect):
    cmds = resolve(dev, lambda cb, exe: cb.copy_buffer(ref(buf, src, length), ref(buf, dst, length)))
    assert plan_segments(cmds, facts) == (Encoder(expect[0], (Step(0, "copy", expect[1]),)),)


@pytest.mark.parametrize("offset, length, expect", [
    (0, 16, (BLIT, "copyFromBuffer")),       # staged at an aligned offset, then copied
    (2, 16, (COMPUTE, "copy_buffer_generic")),
    (0, 10, (COMPUTE, "copy_buffer_generic")),
])
def test_update_is_a_copy_from_the_staging_buffer(dev, buf, offset, length, expect):
    cmds = resolve(dev, lambda cb, exe: cb.update_buffer(bytes(range(length)), 0, ref(buf, offset, length)))
    assert plan_segments(cmds) == (Encoder(expect[0], (Step(0, "update", expect[1]),)),)


def test_alignment_counts_from_the_allocation_not_the_subspan(dev, buf):
    # The regression IREE's SubAllocatedParameterBuffer guards: offsets include the subspan's own.
    span = buf.subspan(2, 64)
    cmds = resolve(dev, lambda cb, exe: (cb.fill_buffer(ref(span, 2, 8), 0xAB, 1),
                                         cb.fill_buffer(ref(span, 0, 8), 0xAB, 1)))
    assert plan_segments(cmds) == (blit((0, "fill", "fillBuffer")), EncoderEvent(1, "switch"),
                                   compute((1, "fill", "fill_buffer_generic")))


def test_dispatches_direct_and_indirect(dev, buf):
    def record(cb, exe):
        dispatch(cb, exe, buf)
        cb.dispatch(exe, "write_workgroup_ids", ref(buf, 1024, 12), (), (ref(buf, 2048, 128),))
    assert plan_segments(resolve(dev, record)) == (
        compute((0, "dispatch", D), (1, "dispatch", "dispatchThreadgroupsWithIndirectBuffer")),)


# -- encoders, switches and barriers ------------------------------------------------------------------

def test_switching_encoder_kinds_signals_and_waits_the_encoder_event(dev, buf):
    def record(cb, exe):
        cb.fill_buffer(ref(buf, 0, 16), 0, 1)
        cb.copy_buffer(ref(buf, 0, 16), ref(buf, 16, 16))
        dispatch(cb, exe, buf, 64)
        dispatch(cb, exe, buf, 128)
        cb.fill_buffer(ref(buf, 256, 16), 7, 1)
    assert plan_segments(resolve(dev, record)) == (
        blit((0, "fill", "fillBuffer"), (1, "copy", "copyFromBuffer")),
        EncoderEvent(1, "switch"),
        compute((2, "dispatch", D), (3, "dispatch", D)),
        EncoderEvent(2, "switch"),
        blit((4, "fill", "fillBuffer")),
    )


def test_an_emulated_fill_joins_the_open_compute_encoder(dev, buf):
    def record(cb, exe):
        dispatch(cb, exe, buf)
        cb.fill_buffer(ref(buf, 64, 16), 0x1234, 2)
    assert plan_segments(resolve(dev, record)) == (
        compute((0, "dispatch", D), (1, "fill", "fill_buffer_generic")),)


def test_execution_barrier_ends_the_encoder_with_an_event_even_when_none_is_open(dev, buf):
    def record(cb, exe):
        cb.execution_barrier(STAGE.COMMAND_ISSUE, STAGE.DISPATCH)      # nothing open yet
        dispatch(cb, exe, buf)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH)           # two in a row: two events
        dispatch(cb, exe, buf, 64)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.TRANSFER)
        cb.fill_buffer(ref(buf, 0, 16), 1, 1)                          # a new encoder: no switch event
    assert plan_segments(resolve(dev, record)) == (
        EncoderEvent(1, "barrier", 0),
        compute((1, "dispatch", D)),
        EncoderEvent(2, "barrier", 2),
        EncoderEvent(3, "barrier", 3),
        compute((4, "dispatch", D)),
        EncoderEvent(4, "barrier", 5),
        blit((6, "fill", "fillBuffer")),
    )


def test_memory_barrier_is_a_scope_barrier_inside_the_compute_encoder(dev, buf):
    def record(cb, exe):
        dispatch(cb, exe, buf)
        dispatch(cb, exe, buf, 64)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH, MEMORY_BARRIER)
        dispatch(cb, exe, buf, 128)
    (encoder,) = plan_segments(resolve(dev, record))
    assert encoder == compute((0, "dispatch", D), (1, "dispatch", D), (2, "barrier", "memoryBarrierWithScope"),
                              (3, "dispatch", D))
    assert [[s.index for s in g] for g in encoder.groups()] == [[0, 1], [2], [3]]


def test_memory_barrier_after_blit_switches_to_compute(dev, buf):
    def record(cb, exe):
        cb.fill_buffer(ref(buf, 0, 16), 1, 1)
        cb.execution_barrier(STAGE.TRANSFER, STAGE.DISPATCH, MEMORY_BARRIER)
        dispatch(cb, exe, buf)
    assert plan_segments(resolve(dev, record)) == (
        blit((0, "fill", "fillBuffer")), EncoderEvent(1, "switch"),
        compute((1, "barrier", "memoryBarrierWithScope"), (2, "dispatch", D)))


def test_serial_dispatch_type_and_blit_encoders_run_one_command_at_a_time(dev, buf):
    def record(cb, exe):
        dispatch(cb, exe, buf)
        dispatch(cb, exe, buf, 64)
    (encoder,) = plan_segments(resolve(dev, record), MetalFacts(concurrent=False))
    assert [[s.index for s in g] for g in encoder.groups()] == [[0], [1]]
    fills = blit((0, "fill", "fillBuffer"), (1, "fill", "fillBuffer"))
    assert [[s.index for s in g] for g in fills.groups()] == [[0], [1]]


def test_queue_transfer_commands_are_planned_too(dev, buf):
    # queue_fill/queue_copy record into a private command buffer (Device._transfer_commands).
    cmds = dev._transfer_commands(lambda cb: cb.fill_buffer(ref(buf, 1, 3), 0xAB, 1))
    assert plan_segments(cmds) == (compute((0, "fill", "fill_buffer_generic")),)
    assert plan_segments(()) == ()


def test_describe(dev, buf):
    def record(cb, exe):
        dispatch(cb, exe, buf)
        dispatch(cb, exe, buf, 64)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH, MEMORY_BARRIER)
        dispatch(cb, exe, buf, 128)
        cb.execution_barrier(STAGE.DISPATCH, STAGE.TRANSFER)
        cb.copy_buffer(ref(buf, 0, 16), ref(buf, 512, 16))
    assert describe(plan_segments(resolve(dev, record))).splitlines() == [
        "compute: 0 dispatchThreadgroups, 1 dispatchThreadgroups | 2 memoryBarrierWithScope | "
        "3 dispatchThreadgroups",
        "event 1: execution barrier (command 4)",
        "blit: 5 copyFromBuffer",
    ]


# -- what Metal cannot encode -------------------------------------------------------------------------

def test_host_stage_barrier_is_unimplemented(dev, buf):
    cmds = resolve(dev, lambda cb, exe: cb.execution_barrier(STAGE.HOST, STAGE.DISPATCH))
    with pytest.raises(hal.HalError) as ei:
        plan_segments(cmds)
    assert ei.value.code == S.UNIMPLEMENTED and "command 0 (barrier)" in ei.value.message
    assert "HOST" in ei.value.message


def test_event_commands_are_unimplemented(dev, buf):
    event = dev.create_event()
    cmds = resolve(dev, lambda cb, exe: cb.signal_event(event, STAGE.DISPATCH))
    with pytest.raises(hal.HalError) as ei:
        plan_segments(cmds)
    assert ei.value.code == S.UNIMPLEMENTED and "signal_event" in ei.value.message


def test_unknown_command_kind_is_invalid(buf):
    with pytest.raises(hal.HalError) as ei:
        plan_segments([Cmd(0, "teleport", ((Range(buf, 0, 4), "w"),), None)])
    assert ei.value.code == S.INVALID_ARGUMENT and "teleport" in ei.value.message


def test_repeated_byte():
    assert repeated_byte(b"\x00") == 0
    assert repeated_byte(b"\xab\xab") == 0xAB
    assert repeated_byte(b"\xab\xab\xab\xac") is None
    assert repeated_byte(b"") is None


# -- storage modes -----------------------------------------------------------------------------------

@pytest.mark.parametrize("memory_type, platform, unified, expect", [
    (MT.DEVICE_LOCAL, "macos", True, ("Private", "WriteCombined", False)),
    (MT.OPTIMAL_FOR_DEVICE, "macos", False, ("Private", "WriteCombined", False)),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, "macos", False, ("Managed", "WriteCombined", False)),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, "macos", True, ("Shared", "WriteCombined", True)),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE, "ios", False, ("Shared", "WriteCombined", True)),  # iOS is unified
    (MT.HOST_LOCAL | MT.DEVICE_VISIBLE, "macos", False, ("Shared", "WriteCombined", False)),
    (MT.HOST_LOCAL, "macos", False, ("Shared", "WriteCombined", False)),
    (MT.HOST_LOCAL | MT.HOST_CACHED, "ios", True, ("Shared", "DefaultCache", False)),
    (MT.DEVICE_LOCAL | MT.HOST_VISIBLE | MT.HOST_CACHED, "macos", False, ("Managed", "DefaultCache", False)),
])
def test_storage_mode_per_memory_type(memory_type, platform, unified, expect):
    opts = resolve_options = resource_options(memory_type, platform, unified)
    assert (opts.storage_mode, opts.cpu_cache_mode, opts.low_performance) == expect
    assert resolve_options.hazard_tracking_mode == "Tracked"
    assert resource_options(memory_type, platform, unified, hazard_tracking=False).hazard_tracking_mode == "Untracked"


def test_compatible_memory_type_drops_optimal():
    assert compatible_memory_type(MT.OPTIMAL_FOR_DEVICE, unified_memory=True) == (MT.DEVICE_LOCAL, False)


@pytest.mark.parametrize("args, named", [((True,), "memory_type"), ((-1,), "memory_type"),
                                         ((MT.DEVICE_LOCAL, "linux"), "platform")])
def test_storage_mode_bad_arguments(args, named):
    with pytest.raises(hal.HalError) as ei:
        resource_options(*args)
    assert ei.value.code == S.INVALID_ARGUMENT and named in ei.value.message
