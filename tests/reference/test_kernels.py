"""The builtin kernel library's NumPy implementations, and their use through dispatch."""

import numpy as np
import pytest

from reference import hal
from reference.kernels import KERNELS, LIBRARY, run_kernel


def test_library_order_and_signatures():
    assert [(k.name, k.binding_count, k.constant_count) for k in LIBRARY] == [
        ("abs", 2, 0), ("write_constants", 1, 4), ("scale_and_offset", 2, 2), ("write_workgroup_ids", 1, 0),
        ("negate", 2, 0), ("double_it", 2, 0), ("write_dispatch_params", 1, 0), ("spin", 1, 1), ("axpy", 2, 1)]


def run(name, workgroups, constants, *arrays):
    views = [memoryview(bytearray(a.tobytes())) for a in arrays]
    run_kernel(KERNELS[name], workgroups, constants, views)
    return [np.frombuffer(v, a.dtype) for v, a in zip(views, arrays)]


def test_elementwise_kernels_cover_the_bound_range():
    x = np.array([-2.5, 1.0, -0.0, 3.0], np.float32)
    assert run("abs", (1, 1, 1), (), x, np.zeros(4, np.float32))[1].tolist() == [2.5, 1.0, 0.0, 3.0]
    i = np.array([1, -2, 2**31 - 1, 4], np.int32)
    assert run("negate", (1, 1, 1), (), i, np.zeros(4, np.int32))[1].tolist() == [-1, 2, -(2**31 - 1), -4]
    assert run("double_it", (1, 1, 1), (), i, np.zeros(4, np.int32))[1].tolist() == [2, -4, -2, 8]
    out = run("scale_and_offset", (2, 1, 1), (3, 0xFFFFFFF6), np.array([1, 2, 3, 4], np.int32), np.zeros(4, np.int32))
    assert out[1].tolist() == [-7, -4, -1, 2]  # offset 0xFFFFFFF6 is -10 as an i32


def test_write_kernels():
    assert run("write_constants", (1, 1, 1), (11, 22, 33, 2**32 - 1), np.zeros(4, np.int32))[0].tolist() == [11, 22, 33, -1]
    assert run("write_workgroup_ids", (5, 1, 1), (), np.full(8, 7, np.uint32))[0].tolist() == [0, 1, 2, 3, 4, 7, 7, 7]
    assert run("write_dispatch_params", (1, 1, 1), (), np.zeros(3, np.uint32))[0].tolist() == [4, 1, 1]
    assert run("spin", (3, 1, 1), (1000,), np.zeros(4, np.uint32))[0].tolist() == [1000, 1000, 1000, 0]
    y = run("axpy", (1, 1, 1), (2,), np.array([1, 2], np.float32), np.array([10, 20], np.float32))[1]
    assert y.tolist() == [12.0, 24.0]


def test_dispatch_on_device_with_subranges(ref_device):
    exe = ref_device.load_executable()
    inp = ref_device.allocator.allocate_buffer(16)
    out = ref_device.allocator.allocate_buffer(16)
    inp.map_write(0, np.full(4, -2.5, np.float32).tobytes())
    out.map_write(0, np.full(4, -9.0, np.float32).tobytes())
    s = ref_device.create_semaphore()
    ref_device.queue_dispatch([], [(s, 1)], exe, "abs", (1, 1, 1), (),
                              (hal.BufferRef(inp, 4, 8), hal.BufferRef(out, 4, 8)))
    s.wait(1, 10)
    assert np.frombuffer(out.map_read(), np.float32).tolist() == [-9.0, 2.5, 2.5, -9.0]
    cmd = list(ref_device.trace.events("cmd"))[-1]
    assert cmd["entry"] == "abs" and cmd["workgroups"] == [1, 1, 1]
    assert cmd["access"] == [[inp.id, 4, 8, "r"], [out.id, 4, 8, "w"]]


@pytest.mark.parametrize("params,expected", [((4, 1, 1), [0, 1, 2, 3]), ((0, 1, 1), [])])
def test_indirect_dispatch_parameters_read_at_execution(ref_device, params, expected):
    exe = ref_device.load_executable()
    p = ref_device.allocator.allocate_buffer(
        12, usage=hal.BufferUsage.DEFAULT | hal.BufferUsage.DISPATCH_INDIRECT_PARAMETERS | hal.BufferUsage.MAPPING)
    out = ref_device.allocator.allocate_buffer(32)
    out.map_fill(0, 32, 0xCDCDCDCD, 4)
    cb = ref_device.create_command_buffer()
    cb.begin()
    cb.update_buffer(np.array(params, np.uint32).tobytes(), 0, hal.BufferRef(p, 0, 12))
    cb.execution_barrier(hal.ExecutionStage.TRANSFER, hal.ExecutionStage.DISPATCH)
    cb.dispatch(exe, "write_workgroup_ids", hal.BufferRef(p, 0, 12), (), (out,),
                flags=hal.DispatchFlags.DYNAMIC_INDIRECT_PARAMETERS)
    cb.end()
    s = ref_device.create_semaphore()
    ref_device.queue_execute([], [(s, 1)], cb)
    s.wait(1, 10)
    got = np.frombuffer(out.map_read(), np.uint32).tolist()
    assert got == expected + [0xCDCDCDCD] * (8 - len(expected))
