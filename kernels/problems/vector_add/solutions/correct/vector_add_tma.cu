// kplay: arch=sm_90a grid=ceil_div(n,8192) block=128 smem=65536 tma.a=(256) tma.b=(256) tma.out=(256)
// The Tensor Memory Accelerator moves the data; the threads only add. The launch line asks
// the engine for a TMA descriptor of a, b and out (boxes of 256 floats, 1 KiB) and passes
// each in place of the pointer. One thread arms an mbarrier with the bytes to expect and
// issues 32 box loads of a and 32 of b into shared memory; every thread waits on the
// barrier, adds its 64 pairs, and after a proxy fence the same thread issues 32 box stores
// of the sums. Boxes past n read as zeros and are clipped on the way out, so the last
// block needs no bounds checks.
#define BOX 256
#define BOXES 32
#define CHUNK (BOX * BOXES)

struct alignas(64) TensorMap { unsigned long long opaque[16]; };

__device__ __forceinline__ unsigned smem_addr(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

extern "C" __global__ void vector_add(const __grid_constant__ TensorMap a,
                                      const __grid_constant__ TensorMap b,
                                      const __grid_constant__ TensorMap out, int n)
{
    extern __shared__ __align__(128) float tiles[];  // a's chunk, then b's
    __shared__ __align__(8) unsigned long long bar;
    float* ta = tiles;
    float* tb = tiles + CHUNK;
    const int base = blockIdx.x * CHUNK;
    const unsigned b_addr = smem_addr(&bar);

    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b_addr));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     ::"r"(b_addr), "r"(2 * CHUNK * 4) : "memory");
        for (int i = 0; i < BOXES; ++i) {
            const int x = base + i * BOX;
            asm volatile(
                "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                " [%0], [%1, {%2}], [%3];"
                ::"r"(smem_addr(ta + i * BOX)), "l"(&a), "r"(x), "r"(b_addr) : "memory");
            asm volatile(
                "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                " [%0], [%1, {%2}], [%3];"
                ::"r"(smem_addr(tb + i * BOX)), "l"(&b), "r"(x), "r"(b_addr) : "memory");
        }
    }
    __syncthreads();  // the barrier is initialised before anyone waits on it
    asm volatile(
        "{\n .reg .pred done;\n wait:\n"
        " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
        " @!done bra wait;\n}" ::"r"(b_addr) : "memory");

    for (int i = threadIdx.x; i < CHUNK; i += blockDim.x)
        ta[i] += tb[i];
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // sums visible to TMA
    __syncthreads();

    if (threadIdx.x == 0) {
        for (int i = 0; i < BOXES; ++i) {
            asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%1}], [%2];"
                         ::"l"(&out), "r"(base + i * BOX), "r"(smem_addr(ta + i * BOX)) : "memory");
        }
        asm volatile("cp.async.bulk.commit_group;" ::: "memory");
        asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
    }
}
