"""Dispatch suites (IREE CTS [H] command_buffer/dispatch_*_test.cc, C.3.15-C.3.22; classic
command_buffer_dispatch_test.h and command_buffer_dispatch_constants_test.h, C.1.7/C.1.8).

IREE compiles one test executable per suite; here every kernel comes from the builtin library
(``device.load_executable()``), looked up by name: abs, write_constants, scale_and_offset,
write_workgroup_ids, negate, double_it, write_dispatch_params. Suites marked "× modes" in the inventory
take ``recording_mode``; the others use binding-table slots by design."""

import gc
import weakref

import pytest

from reference import hal
from .conftest import (
    BU, MT, WAIT, WHOLE, Recording, f32s, filled, i32s, read_bytes, sl, submit_and_wait, u32s,
    with_data, write_bytes, zeroed,
)

STAGE = hal.ExecutionStage
SCOPE = hal.AccessScope
CAT = hal.CommandCategory
MODE = hal.CommandBufferMode
DF = hal.DispatchFlags
SENTINEL = 0xCDCDCDCD


def f32_bits(x: float) -> int:
    return int.from_bytes(f32s(x), "little")


def barrier(cb):
    """The CTS's full barrier after a dispatch."""
    cb.execution_barrier(STAGE.DISPATCH | STAGE.TRANSFER | STAGE.COMMAND_RETIRE,
                         STAGE.COMMAND_ISSUE | STAGE.DISPATCH | STAGE.TRANSFER)


def dispatch_barrier(cb):
    """A dispatch→dispatch memory barrier (DispatchPipelineTest)."""
    cb.execution_barrier(STAGE.DISPATCH, STAGE.DISPATCH, memory_barriers=[(SCOPE.DISPATCH_WRITE, SCOPE.DISPATCH_READ)])


# -- DispatchTest (C.3.15) / CommandBufferDispatchTest (C.1.7) ---------------------------------------------

@pytest.mark.iree("DispatchTest.DispatchAbs", "CommandBufferDispatchTest.DispatchAbs")
def test_dispatch_abs(device, executable, recording_mode):
    inp = filled(device, 16, f32_bits(-2.5))
    out = filled(device, 16, f32_bits(-9.0))
    if recording_mode == "direct":
        capacity, table = 0, None
        bindings = [hal.BufferRef(inp, 4, 8), hal.BufferRef(out, 4, 8)]
    else:
        capacity, table = 2, [hal.BufferRef(inp, 4, 8), hal.BufferRef(out, 4, 8)]
        bindings = [hal.BufferRef(slot=0, offset=0, length=8), hal.BufferRef(slot=1, offset=0, length=8)]
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.ANY, capacity)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("abs"), (1, 1, 1), (), bindings)
    barrier(cb)
    cb.end()
    submit_and_wait(device, cb, table)
    assert read_bytes(device, out) == f32s(-9.0, 2.5, 2.5, -9.0)


# -- DispatchConstantsTest (C.3.16) / CommandBufferDispatchConstantsTest (C.1.8) ---------------------------

def _constants_output(device):
    return device.allocator.allocate_buffer(16, MT.DEVICE_LOCAL | MT.HOST_VISIBLE,
                                            BU.DISPATCH_STORAGE | BU.TRANSFER | BU.MAPPING)


@pytest.mark.iree("DispatchConstantsTest.DispatchWithDispatchConstants")
def test_dispatch_with_dispatch_constants(device, executable, recording_mode):
    rec = Recording(recording_mode, 1)
    out = _constants_output(device)
    out.map_zero(0, WHOLE)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("write_constants"), (1, 1, 1), (11, 22, 33, 44),
                [rec.ref(0, out, 0, 16)])
    barrier(cb)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == u32s(11, 22, 33, 44)


@pytest.mark.iree("CommandBufferDispatchConstantsTest.DispatchWithDispatchConstants")
def test_dispatch_with_dispatch_constants_inline(device, executable):
    # The classic variant records into an ONE_SHOT|ALLOW_INLINE_EXECUTION command buffer.
    cb = device.create_command_buffer(MODE.ONE_SHOT | MODE.ALLOW_INLINE_EXECUTION, CAT.DISPATCH, 0)
    cb.begin()
    out = _constants_output(device)
    out.map_zero(0, WHOLE)
    cb.dispatch(executable, executable.lookup_export("write_constants"), (1, 1, 1), (11, 22, 33, 44),
                [hal.BufferRef(out, 0, out.byte_length)])
    barrier(cb)
    cb.end()
    submit_and_wait(device, cb)
    assert read_bytes(device, out) == u32s(11, 22, 33, 44)


# -- DispatchConstantsBindingsTest (C.3.17) -----------------------------------------------------------------

@pytest.mark.iree("DispatchConstantsBindingsTest.ScaleAndOffset")
def test_scale_and_offset(device, executable, recording_mode):
    rec = Recording(recording_mode, 2)
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = zeroed(device, 16)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("scale_and_offset"), (1, 1, 1), (3, 10),
                [rec.ref(0, inp, 0, 16), rec.ref(1, out, 0, 16)])
    barrier(cb)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == i32s(13, 16, 19, 22)


# -- DispatchMultiWorkgroupTest (C.3.18) --------------------------------------------------------------------

@pytest.mark.iree("DispatchMultiWorkgroupTest.WriteWorkgroupIds")
def test_write_workgroup_ids(device, executable, recording_mode):
    rec = Recording(recording_mode, 1)
    out = zeroed(device, 4 * 32)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("write_workgroup_ids"), (32, 1, 1), (),
                [rec.ref(0, out, 0, 4 * 32)])
    barrier(cb)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == u32s(*range(32))


# -- DispatchMultiEntrypointTest (C.3.19) -------------------------------------------------------------------

@pytest.mark.iree("DispatchMultiEntrypointTest.NegateAndDouble")
def test_negate_and_double(device, executable, recording_mode):
    rec = Recording(recording_mode, 3)
    inp = with_data(device, i32s(1, 2, 3, 4))
    out_a = zeroed(device, 16)
    out_b = zeroed(device, 16)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("negate"), (1, 1, 1), (),
                [rec.ref(0, inp, 0, 16), rec.ref(1, out_a, 0, 16)])
    barrier(cb)
    cb.dispatch(executable, executable.lookup_export("double_it"), (1, 1, 1), (),
                [rec.ref(0, inp, 0, 16), rec.ref(2, out_b, 0, 16)])
    barrier(cb)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out_a) == i32s(-1, -2, -3, -4)
    assert read_bytes(device, out_b) == i32s(2, 4, 6, 8)


# -- DispatchIndirectParametersTest (C.3.20) ----------------------------------------------------------------
# Output: 32 × u32 sentinel; write_workgroup_ids with a workgroup-count reference to 3 u32 in `params`.
# Indirect mode: slot 0 = output, slot 1 = parameters.

def _params_buffer(device, size=12, usage=BU.DISPATCH_INDIRECT_PARAMETERS | BU.TRANSFER):
    return device.allocator.allocate_buffer(size, MT.OPTIMAL_FOR_DEVICE, usage)


def _expected_ids(n):
    return u32s(*range(n)) + u32s(SENTINEL) * (32 - n)


def _record_indirect_dispatch(cb, executable, rec, out, params, flags, offset=0, length=12):
    cb.dispatch(executable, executable.lookup_export("write_workgroup_ids"), rec.ref(1, params, offset, length),
                (), [rec.ref(0, out, 0, 4 * 32)], flags)
    barrier(cb)


def _static_from_queue_update(device, executable, recording_mode, length):
    rec = Recording(recording_mode, 2)
    out = filled(device, 4 * 32, SENTINEL)
    params = _params_buffer(device)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    _record_indirect_dispatch(cb, executable, rec, out, params, DF.STATIC_INDIRECT_PARAMETERS, length=length)
    cb.end()
    u, e = sl(device, [0], [1]), sl(device, [0], [1])
    device.queue_update([], u, u32s(4, 1, 1), 0, params, 0, 12)
    device.queue_execute(u, e, cb, rec.table)
    device.wait_semaphores(hal.WaitMode.ALL, e, WAIT)
    assert read_bytes(device, out) == _expected_ids(4)


@pytest.mark.iree("DispatchIndirectParametersTest.StaticParametersFromQueueUpdate")
def test_static_parameters_from_queue_update(device, executable, recording_mode):
    _static_from_queue_update(device, executable, recording_mode, 12)


@pytest.mark.iree("DispatchIndirectParametersTest.WholeBufferParameterRef")
def test_whole_buffer_parameter_ref(device, executable, recording_mode):
    _static_from_queue_update(device, executable, recording_mode, WHOLE)


@pytest.mark.iree("DispatchIndirectParametersTest.DynamicParametersFromUpdate")
def test_dynamic_parameters_from_update(device, executable, recording_mode):
    rec = Recording(recording_mode, 2)
    out = filled(device, 4 * 32, SENTINEL)
    params = _params_buffer(device)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.TRANSFER | CAT.DISPATCH)
    cb.begin()
    cb.update_buffer(u32s(4, 1, 1), 0, rec.ref(1, params, 0, 12))
    barrier(cb)
    _record_indirect_dispatch(cb, executable, rec, out, params, DF.DYNAMIC_INDIRECT_PARAMETERS)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == _expected_ids(4)


@pytest.mark.iree("DispatchIndirectParametersTest.DynamicParametersFromFill")
def test_dynamic_parameters_from_fill(device, executable, recording_mode):
    rec = Recording(recording_mode, 2)
    out = filled(device, 4 * 32, SENTINEL)
    params = _params_buffer(device)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.TRANSFER | CAT.DISPATCH)
    cb.begin()
    cb.fill_buffer(rec.ref(1, params, 0, 12), 1, 4)  # → [1, 1, 1]
    barrier(cb)
    _record_indirect_dispatch(cb, executable, rec, out, params, DF.DYNAMIC_INDIRECT_PARAMETERS)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == _expected_ids(1)


@pytest.mark.iree("DispatchIndirectParametersTest.DynamicParametersFromDispatch")
def test_dynamic_parameters_from_dispatch(device, executable, recording_mode):
    rec = Recording(recording_mode, 2)
    out = filled(device, 4 * 32, SENTINEL)
    # Written by a dispatch, then read as parameters: storage usage as well.
    params = _params_buffer(device, usage=BU.DISPATCH_INDIRECT_PARAMETERS | BU.DISPATCH_STORAGE | BU.TRANSFER)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.TRANSFER | CAT.DISPATCH)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("write_dispatch_params"), (1, 1, 1), (),
                [rec.ref(1, params, 0, 12)])
    barrier(cb)
    _record_indirect_dispatch(cb, executable, rec, out, params, DF.DYNAMIC_INDIRECT_PARAMETERS)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == _expected_ids(4)


@pytest.mark.iree("DispatchIndirectParametersTest.SubAllocatedParameterBuffer")
def test_sub_allocated_parameter_buffer(device, executable, recording_mode):
    rec = Recording(recording_mode, 2)
    out = filled(device, 4 * 32, SENTINEL)
    # A 64-byte allocation of u32 32s (a device reading at the wrong offset dispatches 32 workgroups);
    # the real parameters [4, 1, 1] sit at allocation offset 24 = subspan offset 16 + reference offset 8.
    parent = _params_buffer(device, 64)
    write_bytes(device, parent, 0, u32s(32) * 16)
    write_bytes(device, parent, 24, u32s(4, 1, 1))
    params = parent.subspan(16, 32)
    if rec.indirect:
        rec.bind(1, params)
    cb = rec.create(device, MODE.ONE_SHOT, CAT.DISPATCH)
    cb.begin()
    _record_indirect_dispatch(cb, executable, rec, out, params, DF.STATIC_INDIRECT_PARAMETERS, offset=8)
    cb.end()
    rec.submit_and_wait(device, cb)
    assert read_bytes(device, out) == _expected_ids(4)


# -- DispatchPipelineTest (C.3.21): scale_and_offset chains through binding-table slots ----------------------

def _scale_and_offset(cb, executable, scale, offset, src_slot, dst_slot):
    cb.dispatch(executable, executable.lookup_export("scale_and_offset"), (1, 1, 1), (scale, offset),
                [hal.BufferRef(slot=src_slot, offset=0, length=16), hal.BufferRef(slot=dst_slot, offset=0, length=16)])
    dispatch_barrier(cb)


@pytest.mark.iree("DispatchPipelineTest.UpdateThenDispatch")
def test_update_then_dispatch(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = zeroed(device, 16)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.DISPATCH, 2)
    cb.begin()
    _scale_and_offset(cb, executable, 2, 5, 0, 1)
    cb.end()
    submit_and_wait(device, cb, [inp, out])
    assert read_bytes(device, out) == i32s(7, 9, 11, 13)


@pytest.mark.iree("DispatchPipelineTest.ChainedDispatches")
def test_chained_dispatches(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    mid = zeroed(device, 16)
    out = zeroed(device, 16)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.DISPATCH, 3)
    cb.begin()
    _scale_and_offset(cb, executable, 2, 0, 0, 1)
    _scale_and_offset(cb, executable, 1, 10, 1, 2)
    cb.end()
    submit_and_wait(device, cb, [inp, mid, out])
    assert read_bytes(device, out) == i32s(12, 14, 16, 18)
    assert read_bytes(device, mid) == i32s(2, 4, 6, 8)


@pytest.mark.iree("DispatchPipelineTest.FillDispatchDispatchPipeline")
def test_fill_dispatch_dispatch_pipeline(device, executable):
    inp = zeroed(device, 16)
    mid = zeroed(device, 16)
    out = zeroed(device, 16)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.ANY, 3)
    cb.begin()
    cb.update_buffer(i32s(10, 20, 30, 40), 0, hal.BufferRef(slot=0, offset=0, length=16))
    cb.execution_barrier(STAGE.TRANSFER, STAGE.DISPATCH, memory_barriers=[(SCOPE.TRANSFER_WRITE, SCOPE.DISPATCH_READ)])
    _scale_and_offset(cb, executable, 3, 0, 0, 1)
    _scale_and_offset(cb, executable, 1, 7, 1, 2)
    cb.end()
    submit_and_wait(device, cb, [inp, mid, out])
    assert read_bytes(device, mid) == i32s(30, 60, 90, 120)
    assert read_bytes(device, out) == i32s(37, 67, 97, 127)


@pytest.mark.iree("DispatchPipelineTest.TransientInputPipeline")
def test_transient_input_pipeline(device, executable):
    ready = device.create_semaphore(0)
    inp = device.queue_alloca([], [(ready, 1)], 16, MT.OPTIMAL_FOR_DEVICE, BU.TRANSFER | BU.DISPATCH_STORAGE)
    ready.wait(1, WAIT)
    write_bytes(device, inp, 0, i32s(5, 10, 15, 20))
    out = zeroed(device, 16)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.DISPATCH, 2)
    cb.begin()
    _scale_and_offset(cb, executable, 4, 1, 0, 1)
    cb.end()
    submit_and_wait(device, cb, [inp, out])
    assert read_bytes(device, out) == i32s(21, 41, 61, 81)
    done = device.create_semaphore(0)
    device.queue_dealloca([], [(done, 1)], inp)
    done.wait(1, WAIT)


@pytest.mark.iree("DispatchPipelineTest.ReusablePipelineWithDifferentInputs")
def test_reusable_pipeline_with_different_inputs(device, executable):
    cb = device.create_command_buffer(MODE.DEFAULT, CAT.DISPATCH, 3)
    cb.begin()
    _scale_and_offset(cb, executable, 2, 0, 0, 1)
    _scale_and_offset(cb, executable, 1, 100, 1, 2)
    cb.end()
    for values, expected in (((1, 2, 3, 4), (102, 104, 106, 108)), ((10, 20, 30, 40), (120, 140, 160, 180)),
                             ((0, 0, 0, 0), (100, 100, 100, 100))):
        inp = with_data(device, i32s(*values))
        mid = zeroed(device, 16)
        out = zeroed(device, 16)
        submit_and_wait(device, cb, [inp, mid, out])
        assert read_bytes(device, out) == i32s(*expected), values


# -- DispatchReuseTest (C.3.22) ------------------------------------------------------------------------------

def workgroup_ids_cb(device, executable, n, mode=MODE.DEFAULT):
    """``WG(n)``: reusable DISPATCH cb, capacity 1, write_workgroup_ids (n,1,1) into slot 0, then a barrier."""
    cb = device.create_command_buffer(mode, CAT.DISPATCH, 1)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("write_workgroup_ids"), (n, 1, 1), (),
                [hal.BufferRef(slot=0, offset=0, length=4 * n)])
    barrier(cb)
    cb.end()
    return cb


@pytest.mark.iree("DispatchReuseTest.ResubmitWithDifferentBindings")
def test_resubmit_with_different_bindings(device, executable):
    cb = workgroup_ids_cb(device, executable, 64)
    for _ in range(3):
        out = zeroed(device, 4 * 64)
        submit_and_wait(device, cb, [out])
        assert read_bytes(device, out) == u32s(*range(64))


@pytest.mark.iree("DispatchReuseTest.LargeWorkgroupCount")
def test_large_workgroup_count(device, executable):
    cb = workgroup_ids_cb(device, executable, 1024)
    out = zeroed(device, 4 * 1024)
    submit_and_wait(device, cb, [out])
    assert read_bytes(device, out) == u32s(*range(1024))


def _abs_buffers(device):
    return filled(device, 16, f32_bits(-2.5)), filled(device, 16, f32_bits(-9.0))


@pytest.mark.iree("DispatchReuseTest.MixedDirectAndIndirectBindings")
def test_mixed_direct_and_indirect_bindings(device, executable):
    inp, out = _abs_buffers(device)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.DISPATCH, 1)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("abs"), (1, 1, 1), (),
                [hal.BufferRef(inp, 4, 8), hal.BufferRef(slot=0, offset=4, length=8)])
    barrier(cb)
    cb.end()
    submit_and_wait(device, cb, [hal.BufferRef(out, 0, WHOLE)])
    assert read_bytes(device, out) == f32s(-9.0, 2.5, 2.5, -9.0)


@pytest.mark.iree("DispatchReuseTest.DeferredExecuteRetainsDispatchBindingTable")
def test_deferred_execute_retains_dispatch_binding_table(device, executable):
    inp, out = _abs_buffers(device)
    cb = device.create_command_buffer(MODE.ONE_SHOT, CAT.DISPATCH, 2)
    cb.begin()
    cb.dispatch(executable, executable.lookup_export("abs"), (1, 1, 1), (),
                [hal.BufferRef(slot=0, offset=4, length=8), hal.BufferRef(slot=1, offset=4, length=8)])
    barrier(cb)
    cb.end()
    w, g = sl(device, [0], [1]), sl(device, [0], [1])
    table = [hal.BufferRef(inp, 0, WHOLE), hal.BufferRef(out, 0, WHOLE)]
    device.queue_execute(w, g, cb, table)
    # Release the command buffer and the input, and clear the caller's table: the queue keeps what it needs.
    refs = weakref.ref(cb), weakref.ref(inp)
    del cb, inp
    table.clear()
    gc.collect()  # (in Python a `del` alone proves nothing: the queue must hold them, as in C)
    assert all(ref() is not None for ref in refs), "a pending submission's command buffer or buffer was freed"
    w[0][0].signal(1)
    device.wait_semaphores(hal.WaitMode.ALL, g, WAIT)
    assert read_bytes(device, out) == f32s(-9.0, 2.5, 2.5, -9.0)


def _alloca_output(device, size, wait, signal):
    return device.queue_alloca(wait, signal, size, MT.OPTIMAL_FOR_DEVICE, BU.TRANSFER | BU.DISPATCH_STORAGE)


@pytest.mark.iree("DispatchReuseTest.AllocaExecuteDeallocaCycle")
def test_alloca_execute_dealloca_cycle(device, executable):
    cb = workgroup_ids_cb(device, executable, 128)
    for _ in range(3):
        a, e, d = sl(device, [0], [1]), sl(device, [0], [1]), sl(device, [0], [1])
        out = _alloca_output(device, 4 * 128, [], a)
        device.queue_execute(a, e, cb, [out])
        device.wait_semaphores(hal.WaitMode.ALL, e, WAIT)
        assert read_bytes(device, out, 0, 4 * 128) == u32s(*range(128))
        device.queue_dealloca(e, d, out)
        device.wait_semaphores(hal.WaitMode.ALL, d, WAIT)


@pytest.mark.iree("DispatchReuseTest.PipelinedAllocaExecuteDealloca")
def test_pipelined_alloca_execute_dealloca(device, executable):
    cb = workgroup_ids_cb(device, executable, 64)
    a_ready, a_done, b_ready, b_done = (sl(device, [0], [1]) for _ in range(4))
    out_a = _alloca_output(device, 4 * 64, [], a_ready)
    device.queue_execute(a_ready, a_done, cb, [out_a])
    out_b = _alloca_output(device, 4 * 64, [], b_ready)
    device.queue_execute(b_ready, b_done, cb, [out_b])
    device.wait_semaphores(hal.WaitMode.ALL, a_done + b_done, WAIT)
    assert read_bytes(device, out_a, 0, 4 * 64) == u32s(*range(64))
    assert read_bytes(device, out_b, 0, 4 * 64) == u32s(*range(64))
    freed = sl(device, [0, 0], [1, 1])
    device.queue_dealloca(a_done, freed[:1], out_a)
    device.queue_dealloca(b_done, freed[1:], out_b)
    device.wait_semaphores(hal.WaitMode.ALL, freed, WAIT)


def _two_dispatch_cb(device, executable):
    cb = device.create_command_buffer(MODE.DEFAULT, CAT.DISPATCH, 2)
    cb.begin()
    for slot in (0, 1):  # command indices 0 and 2: each dispatch is followed by a barrier
        cb.dispatch(executable, executable.lookup_export("write_workgroup_ids"), (32, 1, 1), (),
                    [hal.BufferRef(slot=slot, offset=0, length=4 * 32)])
        barrier(cb)
    cb.end()
    return cb


@pytest.mark.iree("DispatchReuseTest.MultipleDispatchesInSingleCommandBuffer")
def test_multiple_dispatches_in_single_command_buffer(device, executable):
    cb = _two_dispatch_cb(device, executable)
    out0, out1 = zeroed(device, 4 * 32), zeroed(device, 4 * 32)
    submit_and_wait(device, cb, [out0, out1])
    assert read_bytes(device, out0) == u32s(*range(32))
    assert read_bytes(device, out1) == u32s(*range(32))


@pytest.mark.iree("DispatchReuseTest.MultiDispatchMultiResubmit")
def test_multi_dispatch_multi_resubmit(device, executable):
    cb = _two_dispatch_cb(device, executable)
    for i in range(5):
        out0, out1 = zeroed(device, 4 * 32), zeroed(device, 4 * 32)
        submit_and_wait(device, cb, [out0, out1])
        assert read_bytes(device, out0) == u32s(*range(32)), i
        assert read_bytes(device, out1) == u32s(*range(32)), i
