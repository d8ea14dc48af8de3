// The builtin kernel library in the Metal Shading Language (real_backends/common/kernel_abi.py gives the
// ABI; builtin.cl is the OpenCL C original). Metal binds buffers by index: binding k is [[buffer(k)]], and
// after the B bindings one `constant uint* params [[buffer(B)]]` holds
//   params = [o0, o1, ..., o(B-1), c0, c1, ..., n]
// (the byte offset of every binding, the 32-bit constants, then n = work items). Dispatched 1-D with at
// least n threads; every kernel guards `if (i >= n) return;`. Compiled at run time by newLibraryWithSource.
#include <metal_stdlib>
using namespace metal;

#define AT(T, b, o) ((device T*)((b) + (o)))

kernel void hal_abs(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                    constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint n = params[2]; if (i >= n) return;
  AT(float, b1, params[1])[i] = fabs(AT(float, b0, params[0])[i]);
}

kernel void hal_write_constants(device uchar* b0 [[buffer(0)]],
                                constant uint* params [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  uint n = params[5]; if (i >= n) return;
  AT(uint, b0, params[0])[i] = params[1 + i];  // c0..c3 follow the offset
}

kernel void hal_scale_and_offset(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                                 constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint n = params[4]; if (i >= n) return;
  uint scale = params[2], offset = params[3];
  AT(uint, b1, params[1])[i] = AT(uint, b0, params[0])[i] * scale + offset;  // wraps like the int32 reference
}

kernel void hal_write_workgroup_ids(device uchar* b0 [[buffer(0)]],
                                    constant uint* params [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  uint n = params[1]; if (i >= n) return;
  AT(uint, b0, params[0])[i] = i;
}

kernel void hal_negate(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                       constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint n = params[2]; if (i >= n) return;
  AT(uint, b1, params[1])[i] = 0u - AT(uint, b0, params[0])[i];
}

kernel void hal_double_it(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                          constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint n = params[2]; if (i >= n) return;
  AT(uint, b1, params[1])[i] = AT(uint, b0, params[0])[i] * 2u;
}

kernel void hal_write_dispatch_params(device uchar* b0 [[buffer(0)]],
                                      constant uint* params [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  uint n = params[1]; if (i >= n) return;
  AT(uint, b0, params[0])[i] = i == 0 ? 4u : 1u;
}

kernel void hal_spin(device uchar* b0 [[buffer(0)]],
                     constant uint* params [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  uint n = params[2]; if (i >= n) return;
  uint iterations = params[1];
  volatile uint acc = i;  // volatile: the busy loop is not optimized away
  for (uint k = 0; k < iterations; ++k) acc = acc * 1664525u + 1013904223u;
  AT(uint, b0, params[0])[i] = iterations;
}

kernel void hal_axpy(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                     constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  uint n = params[3]; if (i >= n) return;
  AT(float, b1, params[1])[i] = (float)(int)params[2] * AT(float, b0, params[0])[i] + AT(float, b1, params[1])[i];
}

// Helpers for commands the blit encoder cannot take (reference/utils/command_segments.py):
// fill_buffer_generic writes a pattern widened to 4 bytes byte by byte; copy_buffer_generic copies bytes.
// params = [offset, length, pattern] and [source offset, target offset, length].
kernel void fill_buffer_generic(device uchar* b0 [[buffer(0)]],
                                constant uint* params [[buffer(1)]], uint i [[thread_position_in_grid]]) {
  if (i >= params[1]) return;
  b0[params[0] + i] = (uchar)(params[2] >> (8u * (i & 3u)));  // byte i of the repeated pattern
}

kernel void copy_buffer_generic(device uchar* b0 [[buffer(0)]], device uchar* b1 [[buffer(1)]],
                                constant uint* params [[buffer(2)]], uint i [[thread_position_in_grid]]) {
  if (i >= params[2]) return;
  b1[params[1] + i] = b0[params[0] + i];
}
