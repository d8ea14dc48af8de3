// The builtin kernel library in CUDA C (real_backends/common/kernel_abi.py gives the ABI; builtin.cl is
// the OpenCL C original): per binding a byte pointer and a 64-bit byte offset (a binding may start past
// 4 GiB), then the 32-bit constants, then n = work items. Launched 1-D (grid * block >= n); every
// kernel guards `if (i >= n) return;`.
// Compiled at run time by NVRTC (no headers are included: NVRTC has no standard library by default).
#define AT(T, b, o) ((T*)((b) + (o)))
#define GID() (blockIdx.x * blockDim.x + threadIdx.x)

extern "C" __global__ void hal_abs(unsigned char* b0, unsigned long long o0, unsigned char* b1, unsigned long long o1,
                                   unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(float, b1, o1)[i] = fabsf(AT(float, b0, o0)[i]);
}

extern "C" __global__ void hal_write_constants(unsigned char* b0, unsigned long long o0, unsigned int c0,
                                               unsigned int c1, unsigned int c2, unsigned int c3, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  unsigned int c[4] = {c0, c1, c2, c3};
  AT(unsigned int, b0, o0)[i] = c[i];
}

extern "C" __global__ void hal_scale_and_offset(unsigned char* b0, unsigned long long o0, unsigned char* b1,
                                                unsigned long long o1, unsigned int scale, unsigned int offset,
                                                unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(unsigned int, b1, o1)[i] = AT(unsigned int, b0, o0)[i] * scale + offset;  // wraps like the int32 reference
}

extern "C" __global__ void hal_write_workgroup_ids(unsigned char* b0, unsigned long long o0, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(unsigned int, b0, o0)[i] = i;
}

extern "C" __global__ void hal_negate(unsigned char* b0, unsigned long long o0, unsigned char* b1,
                                      unsigned long long o1, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(unsigned int, b1, o1)[i] = 0u - AT(unsigned int, b0, o0)[i];
}

extern "C" __global__ void hal_double_it(unsigned char* b0, unsigned long long o0, unsigned char* b1,
                                         unsigned long long o1, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(unsigned int, b1, o1)[i] = AT(unsigned int, b0, o0)[i] * 2u;
}

extern "C" __global__ void hal_write_dispatch_params(unsigned char* b0, unsigned long long o0, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  AT(unsigned int, b0, o0)[i] = i == 0 ? 4u : 1u;
}

extern "C" __global__ void hal_spin(unsigned char* b0, unsigned long long o0, unsigned int iterations, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  volatile unsigned int acc = i;  // volatile: the busy loop is not optimized away
  for (unsigned int k = 0; k < iterations; ++k) acc = acc * 1664525u + 1013904223u;
  AT(unsigned int, b0, o0)[i] = iterations;
}

extern "C" __global__ void hal_axpy(unsigned char* b0, unsigned long long o0, unsigned char* b1, unsigned long long o1,
                                    unsigned int a, unsigned int n) {
  unsigned int i = GID(); if (i >= n) return;
  // __fmul_rn/__fadd_rn: never contracted into an FMA (NVRTC's default --fmad=true would), so the result
  // rounds twice exactly like the float32 NumPy reference.
  AT(float, b1, o1)[i] = __fadd_rn(__fmul_rn((float)(int)a, AT(float, b0, o0)[i]), AT(float, b1, o1)[i]);
}
