"""QueueDispatchTest and QueueDispatchIndirectParametersTest: single dispatches without a command buffer
(IREE CTS [H] queue/queue_dispatch_test.cc, C.3.26). ``scale_and_offset`` with constants [3, 10] over
input [1, 2, 3, 4]; bindings are direct."""

import pytest

from reference import hal
from .conftest import (
    BU, MT, WHOLE, filled, i32s, lsig, lwait, read_bytes, sl, u32s, with_data, zeroed,
)

DF = hal.DispatchFlags
SENTINEL = 0xCDCDCDCD


def signal_list(device):
    return sl(device, [0], [1])


def scale_and_offset(device, executable, wait, signal, inp, out, workgroups=(1, 1, 1)):
    device.queue_dispatch(wait, signal, executable, executable.lookup_export("scale_and_offset"), workgroups,
                          constants=(3, 10), bindings=(hal.BufferRef(inp, 0, 16), hal.BufferRef(out, 0, 16)))


@pytest.mark.iree("QueueDispatchTest.DispatchWithConstantsAndBindings")
def test_dispatch_with_constants_and_bindings(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = zeroed(device, 16)
    g = signal_list(device)
    scale_and_offset(device, executable, [], g, inp, out)
    lwait(device, g)
    assert read_bytes(device, out) == i32s(13, 16, 19, 22)


@pytest.mark.iree("QueueDispatchTest.DispatchWithBorrowedResourceLifetimes")
def test_dispatch_with_borrowed_resource_lifetimes(device, executable):
    # IREE_HAL_DISPATCH_FLAG_BORROW_RESOURCE_LIFETIMES = 1 << 6 (HAL_SEMANTICS CB11, Q13): the caller
    # promises to keep the executable and buffers alive until the signal, so the queue need not retain them.
    borrow = getattr(hal.DispatchFlags, "BORROW_RESOURCE_LIFETIMES", None)
    assert borrow is not None, "hal.DispatchFlags lacks BORROW_RESOURCE_LIFETIMES (IREE 1 << 6)"
    assert int(borrow) == 1 << 6
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = zeroed(device, 16)
    g = signal_list(device)
    device.queue_dispatch([], g, executable, executable.lookup_export("scale_and_offset"), (1, 1, 1),
                          constants=(3, 10), bindings=(hal.BufferRef(inp, 0, 16), hal.BufferRef(out, 0, 16)),
                          flags=borrow)
    lwait(device, g)  # inp, out and executable stay alive here until the signal, as promised
    assert read_bytes(device, out) == i32s(13, 16, 19, 22)


@pytest.mark.iree("QueueDispatchTest.NoopDispatchSignalsAndDoesNotTouchBuffers")
def test_noop_dispatch_signals_and_does_not_touch_buffers(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = filled(device, 16, 99)
    g = signal_list(device)
    scale_and_offset(device, executable, [], g, inp, out, workgroups=(0, 0, 0))
    lwait(device, g)
    assert g[0][0].query() == 1
    assert read_bytes(device, out) == u32s(99, 99, 99, 99)


@pytest.mark.iree("QueueDispatchTest.DeferredNoopDispatch")
def test_deferred_noop_dispatch(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = filled(device, 16, 99)
    w, g = signal_list(device), signal_list(device)
    scale_and_offset(device, executable, w, g, inp, out, workgroups=(0, 0, 0))
    assert g[0][0].query() == 0  # a no-op dispatch still waits
    lsig(w)
    lwait(device, g)
    assert read_bytes(device, out) == u32s(99, 99, 99, 99)


@pytest.mark.iree("QueueDispatchTest.DeferredWaitBeforeSignalDispatch")
def test_deferred_wait_before_signal_dispatch(device, executable):
    inp = with_data(device, i32s(1, 2, 3, 4))
    out = zeroed(device, 16)
    w, g = signal_list(device), signal_list(device)
    scale_and_offset(device, executable, w, g, inp, out)
    assert g[0][0].query() == 0
    assert read_bytes(device, out) == bytes(16)
    lsig(w)
    lwait(device, g)
    assert read_bytes(device, out) == i32s(13, 16, 19, 22)


# -- QueueDispatchIndirectParametersTest ---------------------------------------------------------------

def _indirect_parameters(device, executable, flags, length):
    out = filled(device, 4 * 32, SENTINEL)
    params = device.allocator.allocate_buffer(12, MT.OPTIMAL_FOR_DEVICE, BU.DISPATCH_INDIRECT_PARAMETERS | BU.TRANSFER)
    u, g = signal_list(device), signal_list(device)
    device.queue_update([], u, u32s(4, 1, 1), 0, params, 0, 12)
    device.queue_dispatch(u, g, executable, executable.lookup_export("write_workgroup_ids"),
                          hal.BufferRef(params, 0, length), bindings=(hal.BufferRef(out, 0, 4 * 32),), flags=flags)
    lwait(device, g)
    assert read_bytes(device, out) == u32s(0, 1, 2, 3) + u32s(SENTINEL) * 28


@pytest.mark.iree("QueueDispatchIndirectParametersTest.StaticParameters")
def test_static_parameters(device, executable):
    _indirect_parameters(device, executable, DF.STATIC_INDIRECT_PARAMETERS, 12)


@pytest.mark.iree("QueueDispatchIndirectParametersTest.DynamicParameters")
def test_dynamic_parameters(device, executable):
    _indirect_parameters(device, executable, DF.DYNAMIC_INDIRECT_PARAMETERS, 12)


@pytest.mark.iree("QueueDispatchIndirectParametersTest.WholeBufferParameterRef")
def test_whole_buffer_parameter_ref(device, executable):
    _indirect_parameters(device, executable, DF.STATIC_INDIRECT_PARAMETERS, WHOLE)
