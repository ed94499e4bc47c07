// WRONG: the block's total is written with a plain store instead of atomicAdd, so the
// blocks overwrite one another and out[0] ends up with one block's sum. Right only when
// the launch has a single block (n <= 2048 with the default launch).
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
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
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
            out[0] = acc;
        }
    }
}
