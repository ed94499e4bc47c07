// One pass, shuffles first. Each thread sums a grid-stride slice of x in a register (the
// loop unrolled by four so that several loads are in flight), each warp folds its 32 sums
// with five shuffles, the warps' totals meet in a 32-float shared array, and the first warp
// folds those and issues the block's single atomicAdd. No step of the tree needs a barrier
// except the one between the warps' stores and the first warp's reads.
// blockDim.x must be a multiple of 32, at most 1024.
__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
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
    const int stride = blockDim.x * gridDim.x;

    float acc = 0.0f;
#pragma unroll 4
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        acc += x[i];
    }

    acc = warp_sum(acc);
    if (lane == 0) {
        warp_totals[warp] = acc;
    }
    __syncthreads();

    if (warp == 0) {
        const int warps = blockDim.x >> 5;
        acc = warp_sum(lane < warps ? warp_totals[lane] : 0.0f);
        if (lane == 0) {
            atomicAdd(out, acc);
        }
    }
}
