// out[0] = x[0] + x[1] + ... + x[n-1] in one launch. out[0] is zero when the kernel starts.
// Default launch: min(ceil_div(n, 2048), 1024) blocks of 256 threads.

// The sum of v over the 32 lanes of the calling warp, left in lane 0.
__device__ __forceinline__ float warp_sum(float v)
{
    // ---- TODO (1) -------------------------------------------------------------------
    // Five shuffle steps: v += __shfl_down_sync(0xffffffffu, v, offset) for offset
    // 16, 8, 4, 2, 1. All 32 lanes must execute them.
    // ---- end of TODO ------------------------------------------------------------------
    return v;
}

extern "C" __global__ void reduce_sum(const float* __restrict__ x, float* __restrict__ out, int n)
{
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;

    // Each thread adds up its own grid-stride slice of x in a register.
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        acc += x[i];
    }

    // ---- TODO (2) -----------------------------------------------------------------------
    // a. Declare __shared__ float warp_totals[32] (one slot per warp, at most 32 warps).
    //    acc = warp_sum(acc); lane 0 of each warp stores it in warp_totals[warp].
    // b. __syncthreads();
    // c. In warp 0: take warp_totals[lane] for lane < number of warps (0.0f otherwise),
    //    warp_sum it, and let lane 0 atomicAdd the block's total to out[0].
    // ---- end of TODO ----------------------------------------------------------------------
    (void)lane;
    (void)warp;
    (void)out;
}
