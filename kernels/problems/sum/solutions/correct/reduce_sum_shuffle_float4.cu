// kplay: grid=min(ceil_div(n,1024),1024) block=256
// Shuffles first, shared memory last. Each thread reads x as float4 (16 bytes a load,
// four loads unrolled so several are in flight), each warp sums its 32 values with
// shuffles, the warps' totals meet in a 32-float shared array, and the first warp adds
// them up and issues the block's single atomicAdd. blockDim.x must be a multiple of 32.
// Buffers from cudaMalloc are 256-byte aligned, so the float4 view of x is legal.
#ifndef UNROLL
#define UNROLL 4
#endif

__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

extern "C" __global__ void reduce_sum(const float* __restrict__ x, float* __restrict__ out, int n)
{
    __shared__ float warp_totals[32];
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const int stride = blockDim.x * gridDim.x;
    const int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);

    // UNROLL independent 16-byte loads are issued before any is added, so that many
    // requests are in flight per thread; a plain loop picks up what remains.
    float acc = 0.0f;
    int i = first;
    for (; i + (UNROLL - 1) * stride < n4; i += UNROLL * stride) {
        float4 v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = __ldg(x4 + i + u * stride);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
    }
    for (; i < n4; i += stride) {
        const float4 v = __ldg(x4 + i);
        acc += (v.x + v.y) + (v.z + v.w);
    }
    const int tail = n4 * 4 + first;  // the last n % 4 elements
    if (tail < n) {
        acc += x[tail];
    }

    acc = warp_sum(acc);
    if (lane == 0) {
        warp_totals[warp] = acc;
    }
    __syncthreads();

    if (warp == 0) {
        const int warps = (blockDim.x + 31) / 32;
        acc = warp_sum(lane < warps ? warp_totals[lane] : 0.0f);
        if (lane == 0) {
            atomicAdd(out, acc);
        }
    }
}
