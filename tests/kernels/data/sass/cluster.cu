// Blocks in clusters of two: each writes its shared array, the cluster barrier makes the
// writes visible, then each reads its neighbour's array through distributed shared memory.
#include <cstdint>

extern "C" __global__ void __cluster_dims__(2, 1, 1) cluster_swap(const float* in, float* out)
{
    __shared__ float mine[128];
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    int i = blockIdx.x * 128 + threadIdx.x;
    mine[threadIdx.x] = in[i];
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(&mine[threadIdx.x]));
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank ^ 1));
    float theirs;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(theirs) : "r"(remote) : "memory");
    out[i] = theirs;
    // No block may leave while its neighbour may still read its shared memory.
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
