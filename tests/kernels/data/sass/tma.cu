// A 32x32 tile goes from global to shared memory and back through the Tensor Memory
// Accelerator: a prefetch, a load that completes on an mbarrier, a store from shared.
#include <cuda.h>
#include <cstdint>

extern "C" __global__ void tma_copy(const __grid_constant__ CUtensorMap src,
                                    const __grid_constant__ CUtensorMap dst)
{
    __shared__ alignas(128) float tile[32 * 32];
    __shared__ alignas(8) uint64_t bar;
    uint32_t s_tile = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
    uint32_t s_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
    int x = blockIdx.x * 32, y = blockIdx.y * 32;
    if (threadIdx.x == 0) {
        asm volatile("prefetch.tensormap [%0];" :: "l"(&src) : "memory");
        asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];"
                     :: "l"(&src), "r"(x), "r"(y) : "memory");
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(s_bar));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(s_bar), "r"(32 * 32 * 4) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3}], [%4];"
            :: "r"(s_tile), "l"(&src), "r"(x), "r"(y), "r"(s_bar) : "memory");
    }
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
            " selp.u32 %0, 1, 0, p;\n}"
            : "=r"(done) : "r"(s_bar) : "memory");
    }
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) tile[i] *= 2.0f;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];"
                     :: "l"(&dst), "r"(x), "r"(y), "r"(s_tile) : "memory");
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}
