// C = A @ B with A (M x K) and B (K x N) bfloat16, C (M x N) float32, all row-major,
// accumulating in fp32. K and N are multiples of 8; M may be anything.
// This starter gives one thread per element of C and reads A and B straight from global
// memory: correct, and far from the tensor cores. On Hopper the fast path is TMA feeding
// wgmma: say `// kplay: arch=sm_90a ... tma.A=(64,64) tma.A.swizzle=128B` on the first
// line and A arrives as a `const __grid_constant__ CUtensorMap` instead of a pointer.
// kplay: grid=(ceil_div(N,16),ceil_div(M,16)) block=(16,16)
#include <cuda_bf16.h>

extern "C" __global__ void gemm_bf16(const __nv_bfloat16* __restrict__ A,
                                     const __nv_bfloat16* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K)
{
    const int col = blockIdx.x * 16 + threadIdx.x;
    const int row = blockIdx.y * 16 + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += __bfloat162float(A[(size_t)row * K + k]) * __bfloat162float(B[(size_t)k * N + col]);
    C[(size_t)row * N + col] = acc;
}
