// The builtin kernel library in OpenCL C (real_backends/common/kernel_abi.py gives the ABI):
// per binding a byte pointer and a 64-bit byte offset (a binding may start past 4 GiB), then the
// 32-bit constants, then n = work items.
// No fused multiply-add: axpy's a*x + y must round twice, as the NumPy reference does.
#pragma OPENCL FP_CONTRACT OFF
#define AT(T, b, o) ((__global T*)((b) + (o)))

__kernel void hal_abs(__global uchar* b0, ulong o0, __global uchar* b1, ulong o1, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(float, b1, o1)[i] = fabs(AT(float, b0, o0)[i]);
}

__kernel void hal_write_constants(__global uchar* b0, ulong o0, uint c0, uint c1, uint c2, uint c3, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  uint c[4] = {c0, c1, c2, c3};
  AT(uint, b0, o0)[i] = c[i];
}

__kernel void hal_scale_and_offset(__global uchar* b0, ulong o0, __global uchar* b1, ulong o1, uint scale, uint offset,
                               uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(uint, b1, o1)[i] = AT(uint, b0, o0)[i] * scale + offset;  // wraps like the int32 reference
}

__kernel void hal_write_workgroup_ids(__global uchar* b0, ulong o0, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(uint, b0, o0)[i] = i;
}

__kernel void hal_negate(__global uchar* b0, ulong o0, __global uchar* b1, ulong o1, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(uint, b1, o1)[i] = 0u - AT(uint, b0, o0)[i];
}

__kernel void hal_double_it(__global uchar* b0, ulong o0, __global uchar* b1, ulong o1, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(uint, b1, o1)[i] = AT(uint, b0, o0)[i] * 2u;
}

__kernel void hal_write_dispatch_params(__global uchar* b0, ulong o0, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(uint, b0, o0)[i] = i == 0 ? 4u : 1u;
}

__kernel void hal_spin(__global uchar* b0, ulong o0, uint iterations, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  volatile uint acc = i;
  for (uint k = 0; k < iterations; ++k) acc = acc * 1664525u + 1013904223u;
  AT(uint, b0, o0)[i] = iterations;
}

__kernel void hal_axpy(__global uchar* b0, ulong o0, __global uchar* b1, ulong o1, uint a, uint n) {
  uint i = get_global_id(0); if (i >= n) return;
  AT(float, b1, o1)[i] = (float)(int)a * AT(float, b0, o0)[i] + AT(float, b1, o1)[i];
}
