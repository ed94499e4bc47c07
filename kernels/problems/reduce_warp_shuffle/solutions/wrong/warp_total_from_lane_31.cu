// WRONG: __shfl_down_sync moves values towards lane 0, so after the five steps only lane 0
// holds the warp's full sum. This kernel takes the warp's total from lane 31 instead. A
// shift from beyond the last lane returns the caller's own value, so lane 31 has only
// doubled its own slice five times: the result is 32 times one lane's share per warp, and
// for n < 32 (lane 31 has no element) it is zero. Wrong for every n.
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
    if (lane == 31) {
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
