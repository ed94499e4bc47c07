// kplay: grid=(2*min(ceil_div(n,4096),512)) block=256 cluster=(2)
// Thread-block clusters (Hopper): the launch line groups blocks in pairs that run at the
// same time on one GPC and can read each other's shared memory. Each block sums a
// grid-stride slice of x into one float in its own shared memory; after cluster.sync()
// the first block of the pair reads its partner's total through distributed shared
// memory (map_shared_rank) and issues a single atomicAdd for both, halving the atomics.
// The second cluster.sync() keeps the partner's shared memory alive until it was read.
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

__device__ __forceinline__ float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, offset);
    return v;
}

extern "C" __global__ void reduce_sum(const float* __restrict__ x, float* __restrict__ out, int n)
{
    __shared__ float warp_totals[32];
    __shared__ float block_total;
    cg::cluster_group cluster = cg::this_cluster();

    float s = 0.0f;
    const size_t stride = (size_t)blockDim.x * gridDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride)
        s += x[i];
    s = warp_sum(s);
    const unsigned warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) warp_totals[warp] = s;
    __syncthreads();
    if (warp == 0) {
        float t = lane < (blockDim.x + 31) / 32 ? warp_totals[lane] : 0.0f;
        t = warp_sum(t);
        if (lane == 0) block_total = t;
    }
    cluster.sync();
    if (cluster.block_rank() == 0 && threadIdx.x == 0) {
        float total = block_total;
        for (unsigned r = 1; r < cluster.num_blocks(); ++r)
            total += *cluster.map_shared_rank(&block_total, r);
        atomicAdd(out, total);
    }
    cluster.sync();
}
