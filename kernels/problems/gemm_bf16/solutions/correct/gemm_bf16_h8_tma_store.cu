// kplay: arch=sm_90a grid=(2*min(66,ceil_div(M,256)*ceil_div(N,256))) block=384 cluster=(2) smem=230400 tma.A=(128,64) tma.A.swizzle=128B tma.B=(64,64) tma.B.swizzle=128B tma.C=(64,32) tma.C.swizzle=128B
// Hopper ladder, rung 8: rung 7 with a TMA-store epilogue.
//
// In rung 7 each consumer warpgroup ends a tile with 64 float2 stores per thread: 128 KiB
// of C per block leaves the registers through the load/store units, and since every
// cluster finishes its tile at about the same moment, 132 blocks push 17 MB at once and
// wait on it while the tensor cores idle (4 times per launch at 4096^3, once per 64
// k-blocks). Here the registers go to shared memory instead, 64 rows x 32 columns (8 KiB)
// at a time, in the 128-byte swizzle the tensor map of C names, and one thread of the
// warpgroup hands each piece to TMA (cp.async.bulk.tensor ... global.shared::cta). The
// copy engine then writes C to L2 on its own while the warpgroup goes back to wgmma.
//
// Each warpgroup has two 8 KiB pieces and alternates between them: before it writes a
// piece, its issuing thread waits until TMA has read the copy made from it two pieces ago
// (cp.async.bulk.wait_group.read 1) and a named barrier tells the other 127 threads. The
// writes become visible to TMA after fence.proxy.async and a second barrier. The ring keeps
// its 4 stages (192 KiB); the 32 KiB of pieces bring the block to 225 KiB of the 227 KiB
// it may have. TMA clips the boxes at C's edges, so partial tiles need no test.

#include <cuda/std/cstdint>
using cuda::std::uint32_t;
using cuda::std::uint64_t;
// The tensor map the engine passes: 128 opaque bytes, 64-byte aligned (cuda.h's CUtensorMap,
// whose header NVRTC cannot read: it needs the C library's).
struct alignas(64) TensorMap { unsigned long long opaque[16]; };

// ---- shared-memory addresses, mbarriers, TMA, wgmma: the PTX this chapter uses ----

__device__ __forceinline__ uint32_t smem_u32(const void* p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A 1024-byte boundary inside the dynamic shared memory: the 128-byte swizzle repeats
// every 8 rows of 128 bytes, and TMA and wgmma both compute it from the address bits.
__device__ __forceinline__ uint8_t* align_1024(uint8_t* p)
{
    const uint32_t a = smem_u32(p);
    return p + (((a + 1023u) & ~1023u) - a);
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t arrivals)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(arrivals)
                 : "memory");
}

// The barriers' initialisation made visible to the async proxy (TMA) and the cluster.
__device__ __forceinline__ void fence_barrier_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// One arrival that also tells the barrier how many bytes the copies will deliver.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t* bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
}

// Spin until the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity)
{
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n.reg .pred p;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done)
            : "r"(smem_u32(bar)), "r"(parity)
            : "memory");
    } while (!done);
}

// TMA: the box of the tensor map whose first element is column x, row y lands at dst;
// its bytes count down the barrier's transaction count.
__device__ __forceinline__ void tma_load(void* dst, const TensorMap* map, uint64_t* bar,
                                         int x, int y)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y)
        : "memory");
}

// wgmma's 64-bit shared-memory matrix descriptor: start address >> 4 in bits 0-13,
// leading byte offset >> 4 in bits 16-29, stride byte offset >> 4 in bits 32-45, base
// offset 0 (bits 49-51: every tile starts on a 1024-byte boundary), swizzle mode in bits
// 62-63 (1 = 128-byte swizzle).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead, uint32_t stride)
{
    return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) |
           (static_cast<uint64_t>((lead >> 4) & 0x3FFF) << 16) |
           (static_cast<uint64_t>((stride >> 4) & 0x3FFF) << 32) | (1ull << 62);
}

// A (K-major, 128-byte swizzle): rows of 64 bf16 = 128 bytes, 8-row groups 1024 bytes
// apart (stride offset); the leading offset is unused when K fits the swizzle span (1).
// Step kk (16 columns) starts 32 bytes further along the row.
__device__ __forceinline__ uint64_t desc_a(uint32_t tile, int kk)
{
    return smem_desc(tile + kk * 32, 16, 1024);
}

// B (N-major, "transposed", 128-byte swizzle): each TMA box is 64 k-rows of 64 n = 8 KiB,
// a k-row 128 bytes; 8 k-rows (1024 bytes) apart is the stride offset, the next 64
// columns of N (the next box, 8192 bytes on) the leading offset. Step kk: 16 k-rows on.
__device__ __forceinline__ uint64_t desc_b(uint32_t tile, int kk)
{
    return smem_desc(tile + kk * 2048, 8192, 1024);
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

template <int N>
__device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving accumulator reads or writes across a wait.
__device__ __forceinline__ void fence_acc(float* d)
{
#pragma unroll
    for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D(64x256, fp32) += A(64x16, bf16, K-major) * B(16x256, bf16, N-major), one warpgroup.
// Immediates: scale-d 1 (accumulate), scale-a 1, scale-b 1, transpose-a 0 (K-major),
// transpose-b 1 (B is read N-major, as it lies in memory).
__device__ __forceinline__ void wgmma_256(float* d, uint64_t da, uint64_t db)
{
    asm volatile(
        "{\n"
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "
        "%128, %129, 1, 1, 1, 0, 1;\n"
        "}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db));
}

// Thread t of the warpgroup holds, for each 8-column slice j of the 64x256 tile, rows
// 16*(t/32) + (t%32)/4 and 8 rows below, columns 8j + 2*(t%4) and the next: d[4j..4j+3].
// Piece c holds columns 32c..32c+31 (slices 4c..4c+3). In the 128-byte swizzle a row of the
// piece is 128 bytes of eight 16-byte chunks, and chunk u of row r sits at chunk u ^ (r % 8).
__device__ __forceinline__ void put_piece(const float* d, uint8_t* piece, int c)
{
    const int t = threadIdx.x % 128;
    const int row = 16 * (t / 32) + (t % 32) / 4;
#pragma unroll
    for (int jj = 0; jj < 4; ++jj) {
        const int j = 4 * c + jj;
        const int unit = 2 * jj + (t % 4) / 2, within = 8 * (t % 2);
        const int r0 = row, r1 = row + 8;
        *reinterpret_cast<float2*>(piece + r0 * 128 + ((unit ^ (r0 % 8)) * 16) + within) =
            make_float2(d[4 * j], d[4 * j + 1]);
        *reinterpret_cast<float2*>(piece + r1 * 128 + ((unit ^ (r1 % 8)) * 16) + within) =
            make_float2(d[4 * j + 2], d[4 * j + 3]);
    }
}

// 128 threads of one warpgroup meet here (ids 1 and 2; 0 is __syncthreads').
__device__ __forceinline__ void wg_barrier(int id)
{
    asm volatile("bar.sync %0, 128;" ::"r"(id) : "memory");
}

__device__ __forceinline__ void fence_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// TMA store: the box at src goes to C at column x, row y (clipped at C's edges).
__device__ __forceinline__ void tma_store(const TensorMap* map, const void* src, int x, int y)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
            reinterpret_cast<uint64_t>(map)),
        "r"(smem_u32(src)), "r"(x), "r"(y)
        : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// The issuing thread: until at most N of its stores still have to read shared memory.
template <int N>
__device__ __forceinline__ void tma_store_wait_read()
{
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

__device__ __forceinline__ void tma_store_wait_all()
{
    asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// The tile's 64 x 256 block of C leaves in eight pieces through the warpgroup's two buffers.
__device__ __forceinline__ void store_tile(const float* d, uint8_t* pieces, const TensorMap* C,
                                           int M, int m0, int n0, int wg)
{
    const bool issuer = threadIdx.x % 128 == 0;
    if (m0 >= M) return;  // the lower block of a pair tile below C (the same for all 128)
#pragma unroll
    for (int c = 0; c < 8; ++c) {
        uint8_t* piece = pieces + (c % 2) * 8192;
        if (issuer) tma_store_wait_read<1>();
        wg_barrier(wg);
        put_piece(d, piece, c);
        fence_async_smem();
        wg_barrier(wg);
        if (issuer) tma_store(C, piece, n0 + 32 * c, m0);
    }
}


template <int R>
__device__ __forceinline__ void regs_dec()
{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}

template <int R>
__device__ __forceinline__ void regs_inc()
{
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}


__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Arrive on the barrier at the same offset in the shared memory of block `rank` of the
// cluster (mapa turns the local address into that block's).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, uint32_t rank)
{
    asm volatile(
        "{\n.reg .b32 remote;\n"
        "mapa.shared::cluster.u32 remote, %0, %1;\n"
        "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n" ::"r"(
            smem_u32(bar)),
        "r"(rank)
        : "memory");
}

// TMA with multicast: the box lands at dst in every block of `mask` (one bit per rank),
// each block's barrier at the same offset counting its bytes.
__device__ __forceinline__ void tma_load_multicast(void* dst, const TensorMap* map,
                                                   uint64_t* bar, int x, int y, uint16_t mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
        ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_u32(bar)), "r"(x), "r"(y), "h"(mask)
        : "memory");
}

constexpr int kGroupRows = 8;

// Pair tile u -> its tile-row (of 256 rows) and tile-column (of 256 columns).
__device__ __forceinline__ void pair_tile(int u, int rows, int cols, int& tr, int& tc)
{
    const int per_group = kGroupRows * cols;
    const int first = (u / per_group) * kGroupRows;
    const int height = min(kGroupRows, rows - first);
    const int v = u % per_group;
    tr = first + v % height;
    tc = v / height;
}

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_bf16(const __grid_constant__ TensorMap A, const __grid_constant__ TensorMap B,
          const __grid_constant__ TensorMap C, int M, int N, int K)
{
    constexpr int kStages = 4;
    constexpr uint32_t kBytesA = 128 * 64 * 2, kBytesB = 64 * 256 * 2;
    constexpr uint32_t kStageBytes = kBytesA + kBytesB;
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[kStages], empty[kStages];
    uint8_t* ring = align_1024(smem_raw);
    uint8_t* pieces = ring + kStages * kStageBytes;  // 2 x 2 x 8 KiB, 1024-aligned
    const uint32_t rank = cluster_rank();
    const int kblocks = (K + 63) / 64;
    const int rows = (M + 255) / 256, cols = (N + 255) / 256;
    const int pairs = rows * cols, clusters = gridDim.x / 2, me = blockIdx.x / 2;

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 16);
        }
        fence_barrier_init();
    }
    cluster_sync();

    const int wg = threadIdx.x / 128;
    if (wg == 0) {  // producer
        regs_dec<40>();
        if (threadIdx.x == 0) {
            int p = 0;
            for (int u = me; u < pairs; u += clusters) {
                int tr, tc;
                pair_tile(u, rows, cols, tr, tc);
                const int m0 = tr * 256 + rank * 128, n0 = tc * 256;
                for (int kb = 0; kb < kblocks; ++kb, ++p) {
                    const int s = p % kStages;
                    mbar_wait(&empty[s], ((p / kStages) & 1) ^ 1);
                    uint8_t* st = ring + s * kStageBytes;
                    mbar_arrive_expect_tx(&full[s], kStageBytes);
                    tma_load(st, &A, &full[s], kb * 64, m0);
                    for (int j = 2 * rank; j < 2 * rank + 2; ++j)
                        tma_load_multicast(st + kBytesA + j * 8192, &B, &full[s], n0 + 64 * j,
                                           kb * 64, 0x3);
                }
            }
        }
    } else {
        regs_inc<232>();
        const int lane = threadIdx.x % 32;
        const uint32_t a_rows = (wg - 1) * 8192;
        float d[128];
        int p = 0;
        for (int u = me; u < pairs; u += clusters) {
            int tr, tc;
            pair_tile(u, rows, cols, tr, tc);
            const int m0 = tr * 256 + rank * 128 + 64 * (wg - 1), n0 = tc * 256;
#pragma unroll
            for (int i = 0; i < 128; ++i) d[i] = 0.0f;
            for (int kb = 0; kb < kblocks; ++kb, ++p) {
                const int s = p % kStages;
                mbar_wait(&full[s], (p / kStages) & 1);
                const uint32_t a = smem_u32(ring + s * kStageBytes), b = a + kBytesA;
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < 4; ++kk)
                    wgmma_256(d, desc_a(a + a_rows, kk), desc_b(b, kk));
                wgmma_commit();
                wgmma_wait<1>();
                fence_acc(d);
                __syncwarp();
                if (kb > 0 && lane < 2) mbar_arrive_cluster(&empty[(p - 1) % kStages], lane);
            }
            wgmma_wait<0>();
            fence_acc(d);
            __syncwarp();
            if (lane < 2) mbar_arrive_cluster(&empty[(p - 1) % kStages], lane);
            store_tile(d, pieces + (wg - 1) * 16384, &C, M, m0, n0, wg);
        }
        if (threadIdx.x % 128 == 0) tma_store_wait_all();  // C written before the block ends
    }
    cluster_sync();
}
