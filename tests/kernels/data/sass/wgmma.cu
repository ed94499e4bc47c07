// One warpgroup multiplies a 64x8 tile of A by an 8x16 tile of B (fp16 in, fp32 out)
// with wgmma.mma_async, its operands described in shared memory.
#include <cuda_fp16.h>
#include <cstdint>

__device__ uint64_t smem_descriptor(const void* p)
{
    uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    uint64_t desc = (addr & 0x3FFFF) >> 4;
    desc |= uint64_t(8) << 16;   // leading byte offset / 16
    desc |= uint64_t(64) << 32;  // stride byte offset / 16
    return desc;
}

extern "C" __global__ void wgmma_tile(const __half* a, const __half* b, float* c)
{
    __shared__ alignas(128) __half sa[64 * 16];
    __shared__ alignas(128) __half sb[16 * 8];
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) sa[i] = a[i];
    for (int i = threadIdx.x; i < 16 * 8; i += blockDim.x) sb[i] = b[i];
    __syncthreads();
    float d[4] = {0.f, 0.f, 0.f, 0.f};
    uint64_t da = smem_descriptor(sa), db = smem_descriptor(sb);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 "
        "{%0, %1, %2, %3}, %4, %5, 1, 1, 1, 0, 0;\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "l"(da), "l"(db));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    for (int k = 0; k < 4; ++k) c[threadIdx.x * 4 + k] = d[k];
}
