// kplay: arch=sm_90a grid=(ceil_div(N,64),ceil_div(M,64)) block=128
// Hopper's warpgroup MMA: four warps (128 threads) issue one wgmma.mma_async that
// multiplies a 64x16 tile of A by a 16x64 tile of B, both read by the tensor cores
// straight from shared memory through 64-bit matrix descriptors, into 32 float
// accumulators per thread. `wgmma` exists only in the sm_90a target, hence arch= in the
// launch line. The tiles are staged in the layout the instruction reads without a
// swizzle: 8x8 "core matrices" of 16-byte rows, 128 contiguous bytes each, K-major for
// both operands (B is transposed on the way in). One K step at a time, no pipelining:
// the point is the instruction, not the speed (that is the next chapter's job).
#include <cuda_fp16.h>

#ifndef LEAD_BYTES
#define LEAD_BYTES 128    // between the two core matrices along K
#endif
#ifndef STRIDE_BYTES
#define STRIDE_BYTES 256  // between core matrices 8 rows apart (along M or N)
#endif

__device__ __forceinline__ unsigned long long descriptor(const void* tile)
{
    const unsigned long long addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
    unsigned long long d = (addr & 0x3FFFF) >> 4;                 // start address
    d |= (unsigned long long)((LEAD_BYTES >> 4) & 0x3FFF) << 16;   // leading byte offset
    d |= (unsigned long long)((STRIDE_BYTES >> 4) & 0x3FFF) << 32; // stride byte offset
    return d;                                                      // no swizzle, base 0
}

// Element (row, k) of a 64x16 K-major tile: core matrix (row/8, k/8), then row%8, k%8.
__device__ __forceinline__ int at(int row, int k)
{
    return ((row / 8) * 2 + k / 8) * 64 + (row % 8) * 8 + k % 8;
}

extern "C" __global__ void hgemm(const __half* __restrict__ A, const __half* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K)
{
    __shared__ __align__(128) __half sa[64 * 16];
    __shared__ __align__(128) __half sb[64 * 16];
    const int tid = threadIdx.x;
    const int m0 = blockIdx.y * 64, n0 = blockIdx.x * 64;
    float d[32];
    for (int i = 0; i < 32; ++i) d[i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = tid; e < 64 * 16; e += 128) {
            const int r = e / 16, k = e % 16;
            const int gm = m0 + r, gk = k0 + k;
            sa[at(r, k)] = (gm < M && gk < K) ? A[(size_t)gm * K + gk] : __float2half(0.0f);
        }
        for (int e = tid; e < 64 * 16; e += 128) {
            const int c = e % 64, k = e / 64;  // consecutive threads read along a row of B
            const int gk = k0 + k, gn = n0 + c;
            sb[at(c, k)] = (gk < K && gn < N) ? B[(size_t)gk * N + gn] : __float2half(0.0f);
        }
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // for the async proxy
        __syncthreads();
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        const unsigned long long da = descriptor(sa), db = descriptor(sb);
        asm volatile(
            "{\n"
            "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
            "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}, %32, %33, 1, 1, 1, 0, 0;\n"
            "}\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
            : "l"(da), "l"(db));
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
        __syncthreads();  // the tiles are read before the next step overwrites them
    }

    // Accumulator layout: warp w holds rows 16w..16w+15; per 8-column slice j, a thread
    // holds (row, col), (row, col+1), (row+8, col), (row+8, col+1).
    const int warp = tid / 32, lane = tid % 32;
    const int row = m0 + warp * 16 + lane / 4;
    for (int j = 0; j < 8; ++j) {
        const int col = n0 + j * 8 + (lane % 4) * 2;
        const float v[4] = {d[4 * j], d[4 * j + 1], d[4 * j + 2], d[4 * j + 3]};
        for (int q = 0; q < 4; ++q) {
            const int r = row + (q / 2) * 8, c = col + q % 2;
            if (r < M && c < N) C[(size_t)r * N + c] = v[q];
        }
    }
}
