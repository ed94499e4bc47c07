// Two ways to copy into shared memory without staging in registers: cp.async (Ampere's
// per-thread asynchronous copy) and cp.async.bulk (Hopper's bulk copy on an mbarrier).
#include <cstdint>

extern "C" __global__ void staged_sum(const float* in, float* out)
{
    __shared__ alignas(16) float a[256];
    __shared__ alignas(128) float b[256];
    __shared__ alignas(8) uint64_t bar;
    uint32_t s_a = static_cast<uint32_t>(__cvta_generic_to_shared(&a[threadIdx.x]));
    uint32_t s_b = static_cast<uint32_t>(__cvta_generic_to_shared(b));
    uint32_t s_bar = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
    const float* block_in = in + blockIdx.x * 512;
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" :: "r"(s_a), "l"(block_in + threadIdx.x));
    asm volatile("cp.async.commit_group;");
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(s_bar));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 1024;" :: "r"(s_bar));
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 1024, [%2];"
            :: "r"(s_b), "l"(block_in + 256), "r"(s_bar) : "memory");
    }
    asm volatile("cp.async.wait_group 0;" ::: "memory");
    uint32_t done = 0;
    while (!done) {
        asm volatile(
            "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n"
            " selp.u32 %0, 1, 0, p;\n}"
            : "=r"(done) : "r"(s_bar) : "memory");
    }
    __syncthreads();
    out[blockIdx.x * 256 + threadIdx.x] = a[threadIdx.x] + b[threadIdx.x];
}
