"""The OpenCL C library (``builtin.cl``, the model the CUDA C and MSL ports follow) on the ``opencl``
device (PoCL), kernel by kernel, with random inputs: the bytes must equal the NumPy reference's.

``hal_axpy``'s ``a * x + y`` must not be contracted into a fused multiply-add (OpenCL C's
``FP_CONTRACT`` defaults to ON, and PoCL then differs from the reference's two float32 roundings by one
ulp in about a quarter of the results): builtin.cl turns contraction off, and axpy is compared
exactly like every other kernel. The CUDA port uses ``__fmul_rn``/``__fadd_rn`` for the same reason.
"""

from __future__ import annotations

import numpy as np
import pytest

from reference.kernels import LIBRARY

from .harness import dispatch, expected, random_inputs


def _trials(opencl, name, count=6):
    rng = np.random.default_rng(sum(map(ord, name)))
    for trial in range(count):
        workgroups, constants, datas = random_inputs(name, rng)
        got = dispatch(opencl, name, workgroups, constants, datas, offset=4 * trial)
        yield trial, workgroups, constants, got, expected(name, workgroups, constants, datas)


@pytest.mark.parametrize("name", [k.name for k in LIBRARY])
def test_opencl_kernel_matches_numpy_reference(opencl, name):
    for trial, workgroups, constants, got, want in _trials(opencl, name):
        assert got == want, (name, trial, workgroups, constants)


def test_fp_contract_off_makes_axpy_exact(opencl):
    """Contraction off gives the reference's bytes, shown with pyopencl directly on the same device."""
    import pyopencl as cl

    from real_backends.common.kernel_abi import source

    adapter = opencl.adapter
    q = adapter.queues[0]
    assert "#pragma OPENCL FP_CONTRACT OFF" in source("cl")
    program = cl.Program(adapter.context, source("cl")).build()
    rng = np.random.default_rng(7)
    x = (rng.standard_normal(2048) * 1000).astype(np.float32)
    y = (rng.standard_normal(2048) * 1000).astype(np.float32)
    a = -893
    flags = cl.mem_flags.COPY_HOST_PTR | cl.mem_flags.READ_WRITE
    bx = cl.Buffer(adapter.context, flags, hostbuf=x)
    by = cl.Buffer(adapter.context, flags, hostbuf=y)
    program.hal_axpy(q, (2048,), None, bx, np.uint64(0), by, np.uint64(0), np.uint32(a & 0xFFFFFFFF),
                     np.uint32(2048))  # offsets are ulong (kernel_abi)
    out = np.empty_like(y)
    cl.enqueue_copy(q, out, by)
    q.finish()
    assert np.array_equal(out, np.float32(a) * x + y)
