// WRONG: each warp sums its lanes correctly, but the block then adds only warp 0's total
// to out[0]; the other seven warps' sums are dropped. Right only while every element falls
// to the first 32 threads of block 0 (n <= 32).
__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1) {
        v += __shfl_down_sync(0xffffffffu, v, offset);
    }
    return v;
}

extern "C" __global__ void reduce_sum(const float* __restrict__ x, float* __restrict__ out, int n)
{
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        acc += x[i];
    }
    acc = warp_sum(acc);
    if (threadIdx.x == 0) {
        atomicAdd(out, acc);
    }
}
