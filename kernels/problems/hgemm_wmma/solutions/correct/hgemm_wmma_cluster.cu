// Tensor-core GEMM with WMMA, fed by Hopper's copy engine: pairs of blocks (a cluster of
// 2) share every slice of B, which crosses from L2 once for both.
//
// An experiment, kept because its result is instructive: it moves a third fewer bytes
// out of L2 than hgemm_wmma_pipelined.cu and is no faster (about 52% of cuBLAS fp16 on an
// H200 against 54%; bench/RESULTS.md, fourth session). The L2 was not what held the
// pipelined kernel back; see chapter 7 of Part II.
//
// The math is the pipelined kernel's: 8 warps per block, a 128 x 256 block tile, 64 x 64
// per warp (4 x 4 accumulator fragments), fragments loaded one step ahead of the
// mma_sync that uses them. What changes is how the slices reach shared memory:
//  * The two blocks of a cluster compute vertically adjacent tiles of C (rows bm and
//    bm + 128, the same columns), so they need the same B slice. Each copies half of
//    its rows with `cp.async.bulk ... multicast::cluster`: one read from L2 lands in the
//    shared memory of both blocks. L2 traffic per block falls from 128 + 256 to
//    128 + 128 rows of a slice.
//  * A bulk copy completes on an mbarrier in shared memory (`full`, one per stage) that
//    counts bytes: a thread announces how many bytes the stage expects, the copy engine
//    counts them in, and every warp waits on the barrier's phase before reading the
//    stage. With A_ASYNC (the default) A still comes by per-thread 16-byte cp.async,
//    which the same barrier tracks (cp.async.mbarrier.arrive); A_ASYNC 0 makes every row
//    of A a bulk copy too, and is slower: a bulk copy issued by a warp runs one lane at
//    a time (an ELECT loop in the SASS).
//  * A stage may be refilled only when every warp of both blocks has read it, since the
//    partner's copies write into it too. Each warp says so on a second barrier (`empty`)
//    in both blocks; the refill of slice s - 1's stage waits for it REFILL_STEP steps into
//    slice s, by when it has normally completed. A cluster-wide barrier in the loop
//    instead ran at 234 TFLOP/s against 381: its release/acquire compiles to a GPU-wide
//    memory fence (MEMBAR.ALL.GPU) and an L1 invalidation, once per slice.
// Edges: bulk copies need 16-byte rows (K and N multiples of 8); otherwise, and for a
// last slice that K cuts short, the stage is filled element by element with zeros
// outside the matrices. A rows past M are zero-filled; B columns past N are left as
// they are, and only feed columns of C that are never stored. The grid's y extent is
// rounded up to whole clusters; a block below the last row of C still copies its half
// of B for its partner and stores nothing.
// smem = STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2 = 208896 with the defaults.
// kplay: grid=(ceil_div(N,256),2*ceil_div(M,256)) block=256 smem=208896

#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

#ifndef BM
#define BM 128
#endif
#ifndef BN
#define BN 256
#endif
#ifndef BK
#define BK 64
#endif
#ifndef WARPS_M
#define WARPS_M 2
#endif
#ifndef STAGES
#define STAGES 4
#endif
#ifndef CLUSTER
#define CLUSTER 2  // blocks that share B slices (1 or 2); the launch's grid y must be a multiple
#endif
#ifndef GROUP_M
#define GROUP_M 4  // clusters that walk down C before moving right (see tile_origin)
#endif
#ifndef NTHREADS
#define NTHREADS 256
#endif
#ifndef A_ASYNC
#define A_ASYNC 1  // 1: A by per-thread cp.async; 0: A by bulk copies, a row each
#endif
#define WARPS_N (NTHREADS / 32 / WARPS_M)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define FM (WM / 16)
#define FN (WN / 16)
#define PAD 8
#define LDA (BK + PAD)
#define LDB (BN + PAD)
#define A_STAGE (BM * LDA)
#define B_STAGE (BK * LDB)
#define B_ROWS_OWN (BK / CLUSTER)  // rows of each B slice this block copies for the cluster
#define NWARPS (NTHREADS / 32)
#define A_PER_WARP (BM / NWARPS)  // bulk copies of A rows each warp issues (A_ASYNC 0)
#define B_PER_WARP (B_ROWS_OWN / NWARPS)
#ifndef REFILL_STEP
#define REFILL_STEP 1  // step of slice s at which the stage of slice s - 1 is refilled
#endif

static_assert(FM * 16 == WM && FN * 16 == WN, "warp tile");
static_assert((BK / 16) % 2 == 0, "fragment buffers alternate within a slice");
static_assert((BM * BK / 8) % NTHREADS == 0 && NTHREADS % (BK / 8) == 0, "A chunks");
static_assert(A_PER_WARP * NWARPS == BM && B_PER_WARP * NWARPS == B_ROWS_OWN &&
                  (A_ASYNC ? 0 : A_PER_WARP) + B_PER_WARP <= 32,
              "bulk copies: whole rows per warp, one per lane");
static_assert(REFILL_STEP < BK / 16, "refill step");
static_assert(CLUSTER == 1 || CLUSTER == 2, "cluster size");

__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// --- mbarrier and cluster primitives (PTX ISA 8.0, sm_90)
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity) {
    unsigned done;
    do {
        asm volatile(
            "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;"
            " selp.u32 %0, 1, 0, p; }"
            : "=r"(done)
            : "r"(bar), "r"(parity)
            : "memory");
    } while (!done);
}
// Whole-cluster barrier (release/acquire): used twice, around the main loop, never inside.
__device__ __forceinline__ void cluster_sync() {
#if CLUSTER > 1
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
    __syncthreads();
#endif
}
// Arrive on the barrier at offset `bar` in the shared memory of cluster block `cta`.
__device__ __forceinline__ void mbar_arrive_cluster(unsigned bar, unsigned cta) {
#if CLUSTER > 1
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(cta));
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
#else
    mbar_arrive(bar);
#endif
}
__device__ __forceinline__ unsigned cluster_rank() {
#if CLUSTER > 1
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
#else
    return 0;
#endif
}

// --- copies
// 16 bytes global -> shared, asynchronously; `bytes` < 16 fills the rest with zeros (0:
// all zeros, nothing read). A stage's barrier learns of them through cp_async_arrive.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, unsigned bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_u32(smem)), "l"(gmem),
                 "r"(bytes)
                 : "memory");
}
// The barrier's phase also waits for this thread's earlier cp.async copies (one arrival).
__device__ __forceinline__ void cp_async_arrive(unsigned bar) {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// `bytes` (a multiple of 16) from global memory into this block's shared memory, or,
// with CLUSTER 2, into the same offset of both blocks' shared memory; each destination
// block's barrier at offset `bar` counts the bytes in.
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned bytes,
                                          unsigned bar, bool multicast) {
#if CLUSTER > 1
    if (multicast) {
        const unsigned short mask = (1u << CLUSTER) - 1;
        asm volatile(
            "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
            " [%0], [%1], %2, [%3], %4;" ::"r"(smem_u32(smem)),
            "l"(gmem), "r"(bytes), "r"(bar), "h"(mask)
            : "memory");
        return;
    }
#endif
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
            smem_u32(smem)),
        "l"(gmem), "r"(bytes), "r"(bar)
        : "memory");
}

// Which tile of C this block computes. The CLUSTER blocks of a cluster take vertically
// adjacent tiles (same columns); clusters walk down GROUP_M cluster rows before moving
// one tile right, so that the clusters resident at one time share slices in L2.
__device__ __forceinline__ void tile_origin(int& bm, int& bn, int rank) {
    const int tiles_n = gridDim.x, rows_c = gridDim.y / CLUSTER;
    const int id = (blockIdx.y / CLUSTER) * tiles_n + blockIdx.x;
    const int first = (id / (GROUP_M * tiles_n)) * GROUP_M;
    const int rows = min(rows_c - first, GROUP_M);
    const int local = id % (GROUP_M * tiles_n);
    bm = ((first + local % rows) * CLUSTER + rank) * BM;
    bn = (local / rows) * BN;
}

#define CLUSTER_ATTR __cluster_dims__(1, CLUSTER, 1)

extern "C" __global__ void __launch_bounds__(NTHREADS) CLUSTER_ATTR
hgemm(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C, int M,
      int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    __shared__ __align__(8) unsigned long long full[STAGES];   // stage s holds its slice
    __shared__ __align__(8) unsigned long long empty[STAGES];  // every warp of the cluster read it
    half* As = reinterpret_cast<half*>(smem_raw);
    half* Bs = As + STAGES * A_STAGE;

    const int t = threadIdx.x, warp = t / 32, lane = t % 32;
    const int rank = static_cast<int>(cluster_rank());
    int bm, bn;
    tile_origin(bm, bn, rank);
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const int slices = (K + BK - 1) / BK;
    const bool bulk = (K % 8) == 0 && (N % 8) == 0;  // every row starts 16-byte aligned
    const unsigned b_bytes = 2u * min(BN, N - bn);
    const int a_rows = max(0, min(BM, M - bm));

    if (t == 0) {
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(smem_u32(&full[s]), A_ASYNC ? NTHREADS + 1 : 1);
            mbar_init(smem_u32(&empty[s]), CLUSTER * NWARPS);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    // Both blocks' barriers must exist before either block's copies can signal them.
    cluster_sync();

    // Fill stage `stage` with slice `slice`; the stage's barrier completes its phase when
    // the slice is in place.
    auto refill = [&](int stage, int slice) {
        const int k0 = slice * BK;
        const unsigned bar = smem_u32(&full[stage]);
        half* as = As + stage * A_STAGE;
        half* bs = Bs + stage * B_STAGE;
        if (bulk && k0 + BK <= K) {
#if A_ASYNC
#pragma unroll
            for (int p = 0; p < BM * BK / 8 / NTHREADS; ++p) {
                const int r = t / (BK / 8) + p * (NTHREADS / (BK / 8)), c = (t % (BK / 8)) * 8;
                const bool in = r < a_rows;
                cp_async16(as + r * LDA + c, A + (in ? (size_t)(bm + r) * K + k0 + c : 0), in ? 16 : 0);
            }
            cp_async_arrive(bar);
            const unsigned tx = BK * b_bytes;
            const int br = lane;
#else
            const int ar = warp * A_PER_WARP + lane;
            if (lane < A_PER_WARP && ar < a_rows)
                bulk_copy(as + ar * LDA, A + (size_t)(bm + ar) * K + k0, BK * 2, bar, false);
            const unsigned tx = a_rows * BK * 2 + BK * b_bytes;
            const int br = lane - A_PER_WARP;
#endif
            // The copy engine takes one copy per instruction and lane, in turn: each warp
            // issues a few, so that no warp spends long on them.
            if (br >= 0 && br < B_PER_WARP) {
                const int r = rank * B_ROWS_OWN + warp * B_PER_WARP + br;
                bulk_copy(bs + r * LDB, B + (size_t)(k0 + r) * N + bn, b_bytes, bar, true);
            }
            if (t == 0) mbar_arrive_expect_tx(bar, tx);
        } else {
            // Element by element, zeros outside A and B; each block fills its own stage.
            for (int e = t; e < BM * BK; e += NTHREADS) {
                const int r = e / BK, c = e % BK;
                as[r * LDA + c] = (bm + r < M && k0 + c < K) ? A[(size_t)(bm + r) * K + k0 + c]
                                                             : __float2half(0.0f);
            }
            for (int e = t; e < BK * BN; e += NTHREADS) {
                const int r = e / BN, c = e % BN;
                bs[r * LDB + c] = (k0 + r < K && bn + c < N) ? B[(size_t)(k0 + r) * N + bn + c]
                                                             : __float2half(0.0f);
            }
#if A_ASYNC
            mbar_arrive(bar);
            if (t == 0) mbar_arrive_expect_tx(bar, 0);
#else
            __syncthreads();
            if (t == 0) mbar_arrive_expect_tx(bar, 0);
#endif
        }
    };

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major>;
    using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major>;
    auto load_frags = [&](FragA* a, FragB* b, int stage, int kk) {
        const half* as = As + stage * A_STAGE;
        const half* bs = Bs + stage * B_STAGE;
#pragma unroll
        for (int i = 0; i < FM; ++i)
            wmma::load_matrix_sync(a[i], as + (wm + i * 16) * LDA + kk, LDA);
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::load_matrix_sync(b[j], bs + kk * LDB + wn + j * 16, LDB);
    };
    auto mma = [&](const FragA* a, const FragB* b) {
#pragma unroll
        for (int i = 0; i < FM; ++i)
#pragma unroll
            for (int j = 0; j < FN; ++j) wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    };

    if (slices > 0) {
        for (int s = 0; s < STAGES && s < slices; ++s) refill(s, s);
        mbar_wait(smem_u32(&full[0]), 0);
        FragA a[2][FM];
        FragB b[2][FN];
        load_frags(a[0], b[0], 0, 0);
        int read = 0;  // stage of slice s
        for (int s = 0; s < slices; ++s) {
#pragma unroll
            for (int q = 0; q < BK / 16; ++q) {
                const int cur = q & 1;
                const int next = read + 1 == STAGES ? 0 : read + 1;
                if (q + 1 < BK / 16) {
                    load_frags(a[cur ^ 1], b[cur ^ 1], read, (q + 1) * 16);
                } else {
                    // This step's fragments are in registers: the warp is done with the
                    // stage, and says so to both blocks (their copies write into it).
                    __syncwarp();
                    if (lane == 0)
                        for (int c = 0; c < CLUSTER; ++c) mbar_arrive_cluster(smem_u32(&empty[read]), c);
                    if (s + 1 < slices) {
                        mbar_wait(smem_u32(&full[next]), ((s + 1) / STAGES) & 1);
                        load_frags(a[cur ^ 1], b[cur ^ 1], next, 0);
                    }
                }
                mma(a[cur], b[cur]);
                // A step into slice s, refill the stage that slice s - 1 left: by now
                // every warp of the cluster has normally released it, so the wait is short.
                if (q == REFILL_STEP && s >= 1 && s - 1 + STAGES < slices) {
                    const int freed = read == 0 ? STAGES - 1 : read - 1;
                    mbar_wait(smem_u32(&empty[freed]), ((s - 1) / STAGES) & 1);
                    refill(freed, s - 1 + STAGES);
                }
                if (q + 1 == BK / 16) read = next;
            }
        }
    }
    __syncthreads();  // the stages' shared memory is reused as scratch below

    float* scratch = reinterpret_cast<float*>(smem_raw) + warp * 256;
    const bool aligned = (N % 8) == 0;
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) {
            const int r0 = bm + wm + i * 16, c0 = bn + wn + j * 16;
            if (r0 >= M || c0 >= N) continue;
            if (aligned && r0 + 16 <= M && c0 + 16 <= N) {
                wmma::store_matrix_sync(C + (size_t)r0 * N + c0, acc[i][j], N,
                                        wmma::mem_row_major);
            } else {
                wmma::store_matrix_sync(scratch, acc[i][j], 16, wmma::mem_row_major);
                __syncwarp();
                for (int e = lane; e < 256; e += 32) {
                    const int r = r0 + e / 16, c = c0 + e % 16;
                    if (r < M && c < N) C[(size_t)r * N + c] = scratch[e];
                }
                __syncwarp();
            }
        }
    // No block leaves while its partner may still signal its barriers.
    cluster_sync();
}
