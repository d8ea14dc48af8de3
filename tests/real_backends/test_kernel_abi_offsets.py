"""Widths of the kernel ABI's integers (``real_backends/common/kernel_abi.py``): a binding's byte offset
is 64-bit in CUDA C and OpenCL C and 32-bit in MSL; ``n`` is 32-bit everywhere. A value that does not
fit is OUT_OF_RANGE naming it, never wrapped (before 2026-11-25 a CUDA offset of 2^32 + 4 was packed as
a ``c_uint32``, which ctypes silently makes 4). The packing functions are tested directly, so no test
allocates 4 GiB; the compiled kernels' parameter widths come from NVRTC's PTX and PoCL's arg info.
"""

from __future__ import annotations

import ctypes
import re

import numpy as np
import pytest

from real_backends.common.kernel_abi import OFFSET_BITS, launch_arguments, source, symbol
from reference import hal
from reference.kernels import KERNELS, LIBRARY

from .harness import dispatch, expected, random_inputs

BIG = (1 << 32) + 4  # an offset past 4 GiB: wraps to 4 in 32 bits
AXPY = KERNELS["axpy"]


def _out_of_range(fn, *args):
    with pytest.raises(hal.HalError) as e:
        fn(*args)
    assert e.value.code == hal.StatusCode.OUT_OF_RANGE
    return e.value.message


# -- kernel_abi: the widths per language ----------------------------------------------------------------

def test_offsets_are_64_bit_in_cuda_c_and_opencl_c_and_32_bit_in_msl():
    assert OFFSET_BITS == {"cu": 64, "cl": 64, "metal": 32}
    for language in ("cu", "cl"):
        assert launch_arguments(AXPY, [0, BIG], [-3], 9, language) == ([0, BIG], [0xFFFFFFFD], 9)
        assert _out_of_range(launch_arguments, AXPY, [1 << 64, 0], [1], 9, language) == (
            "axpy binding 0 offset = 18446744073709551616 does not fit the kernel ABI's 64-bit parameter "
            "(at most 18446744073709551615)")
    assert launch_arguments(AXPY, [0, (1 << 32) - 1], [1], 9, "metal") == ([0, (1 << 32) - 1], [1], 9)
    assert _out_of_range(launch_arguments, AXPY, [0, BIG], [1], 9, "metal") == (
        "axpy binding 1 offset = 4294967300 does not fit the kernel ABI's 32-bit parameter (at most 4294967295)")


@pytest.mark.parametrize("language", ["cu", "cl", "metal"])
def test_work_items_past_32_bits_are_refused(language):
    assert launch_arguments(AXPY, [0, 0], [1], (1 << 32) - 1, language)[2] == (1 << 32) - 1
    assert _out_of_range(launch_arguments, AXPY, [0, 0], [1], 1 << 32, language) == (
        "axpy work items (n) = 4294967296 does not fit the kernel ABI's 32-bit parameter (at most 4294967295)")


def test_msl_offsets_stay_in_the_uint_params_array():
    """OFFSET_BITS["metal"] is what builtin.metal declares: offsets travel in ``constant uint* params``."""
    kernels = re.findall(r"^kernel void \w+\((.*?)\)\s*{", source("metal"), re.S | re.M)
    declared = [re.search(r"constant (\w+)\* params \[\[buffer", k).group(1) for k in kernels]
    assert declared == ["uint"] * (len(LIBRARY) + 2)  # + the two planner helpers


# -- CUDA: kernelParams -------------------------------------------------------------------------------

def test_cuda_kernel_params_pack_offsets_as_8_bytes():
    from real_backends.cuda.adapter import kernel_params

    values, types = kernel_params(AXPY, [0x1000, 0x2000], [0, BIG], [-3], 9)
    assert values == (0x1000, 0, 0x2000, BIG, 0xFFFFFFFD, 9)
    assert types == (ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                     ctypes.c_uint32, ctypes.c_uint32)
    assert [ctypes.sizeof(t) for t in types] == [8, 8, 8, 8, 4, 4]
    assert _out_of_range(kernel_params, AXPY, [0x1000, 0x2000], [0, 0], [1], 1 << 32).startswith(
        "axpy work items (n) = 4294967296")


def test_cuda_kernel_params_widths_are_the_compiled_kernels():
    """Every ``.param`` of NVRTC's PTX for builtin.cu is as wide as what ``kernel_params`` packs there."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="the 'cuda' extra (NVRTC) is not installed")
    from real_backends.cuda.adapter import kernel_params
    from real_backends.cuda.nvrtc import compile_ptx

    ptx = compile_ptx()
    for spec in LIBRARY:
        m = re.search(rf"\.entry\s+{symbol(spec.name)}\s*\((.*?)\)", ptx, re.S)
        widths = [int(w) for w in re.findall(r"\.param\s+\.u(\d+)", m.group(1))]
        _, types = kernel_params(spec, [0x1000] * spec.binding_count, [BIG] * spec.binding_count,
                                 [0] * spec.constant_count, 1)
        assert widths == [8 * ctypes.sizeof(t) for t in types], spec.name


def test_cuda_bindings_accept_the_packed_large_offset():
    """cuda-bindings converts the kernelParams without complaint (the real call where no driver loads)."""
    pytest.importorskip("cuda.bindings", reason="the 'cuda' extra (cuda-bindings) is not installed")
    from real_backends.cuda.adapter import kernel_params

    from . import fake_cuda

    if not fake_cuda._no_driver():
        pytest.skip("an NVIDIA driver is loadable here: the real call is not made")
    from cuda.bindings import driver as cu
    params = kernel_params(AXPY, [0x1000, 0x2000], [0, BIG], [1], 9)
    fake_cuda.marshals("cuLaunchKernel", (cu.CUfunction(1), 1, 1, 1, 256, 1, 1, 0, cu.CUstream(1), params, 0))


def test_cuda_dispatch_at_an_offset_on_the_fake_driver():
    """The fake checks the packed types (c_void_p, c_uint64 per binding) and runs the reference."""
    pytest.importorskip("cuda.bindings", reason="the 'cuda' extra (cuda-bindings) is not installed")
    from .fake_cuda import install

    rng = np.random.default_rng(11)
    with install() as fake:
        dev = hal.create_device("cuda")
        try:
            for name in ("axpy", "write_constants"):
                workgroups, constants, datas = random_inputs(name, rng)
                assert dispatch(dev, name, workgroups, constants, datas, offset=12) == \
                    expected(name, workgroups, constants, datas), name
        finally:
            dev.close()
    assert [f for f, _, _ in fake.launched] == ["hal_axpy", "hal_write_constants"]


# -- OpenCL: set_args ---------------------------------------------------------------------------------

def test_opencl_kernel_args_pass_offsets_as_ulong():
    from real_backends.opencl.adapter import kernel_args

    args = kernel_args(AXPY, ["x", "y"], [4, BIG], [-3], 9)
    assert args == ["x", 4, "y", BIG, 0xFFFFFFFD, 9]
    assert [type(a) for a in args] == [str, np.uint64, str, np.uint64, np.uint32, np.uint32]
    assert _out_of_range(kernel_args, AXPY, ["x", "y"], [1 << 64, 0], [1], 9).startswith(
        "axpy binding 0 offset = 18446744073709551616")


def test_opencl_kernels_declare_ulong_offsets(opencl):
    """PoCL's kernel arg info for builtin.cl: uchar*, ulong per binding, then uint constants and n."""
    import pyopencl as cl

    program = cl.Program(opencl.adapter.context, source("cl")).build(options=["-cl-kernel-arg-info"])
    for spec in LIBRARY:
        kernel = getattr(program, symbol(spec.name))
        names = [kernel.get_arg_info(i, cl.kernel_arg_info.TYPE_NAME) for i in range(kernel.num_args)]
        assert names == ["uchar*", "ulong"] * spec.binding_count + ["uint"] * (spec.constant_count + 1), spec.name
