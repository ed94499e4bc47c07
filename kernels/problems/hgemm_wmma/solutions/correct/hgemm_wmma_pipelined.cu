// Tensor-core GEMM with WMMA: 8 warps per block, 4x4 accumulator fragments per warp,
// a cp.async pipeline that keeps STAGES K-slices of A and B in shared memory, and
// fragments loaded one step ahead of the mma_sync that uses them.
//
// Why this shape:
//  * A block tile of BM x BN = 128 x 256 split among 8 warps (2 x 4) gives each warp a
//    64x64 tile: 4 A fragments and 4 B fragments loaded from shared memory feed 16
//    mma_sync calls. The bigger the warp tile, the fewer shared-memory reads per
//    multiply; the bigger the block tile, the fewer times A and B cross from L2.
//  * cp.async copies global memory straight into shared memory, without a detour
//    through registers, and does not stall the issuing warp. All STAGES stages hold a
//    slice in flight; the block computes on the oldest while the others arrive.
//  * Deep slices. A slice is 64 halves of K: 4 steps of 16 between two barriers, and
//    with 3 stages about 100 KB of copies in flight per SM, enough to cover the time
//    from L2 or HBM.
//  * One step ahead (PREFETCH). While the mma_sync of step k run, the fragments of
//    step k + 1 are already loading from shared memory into a second set of registers;
//    at the last step of a slice, right after the barrier, that means the first
//    fragments of the next slice. The tensor cores never wait for a load that could
//    have been issued earlier.
//  * Shared rows are padded by 8 halves (16 bytes): the 8 rows that a fragment load
//    reads together then start in 8 different groups of 4 banks.
//  * The price: about 254 registers a thread (one block of 8 warps per SM) and 156,672
//    bytes of shared memory. Blocks take their tiles in groups of GROUP_M block rows
//    (see block_origin) so that the blocks resident at one time share slices in L2.
// These sizes won sweeps on an H200 (bench/tune_gpu.py, bench/RESULTS.md) against
// 128 x 128 tiles at two blocks per SM, 32- and 128-wide slices, 2 to 5 stages and
// loading each step's fragments just before use (PREFETCH 0); they are macros, so try
// others. The launch line must follow: grid from BM and BN, block from NTHREADS, and
// smem = STAGES * (BM * (BK + 8) + BK * (BN + 8)) * 2.
// Edges: a 16-byte copy is used only when all 8 halves exist and are aligned (K and N
// multiples of 8); otherwise the chunk is filled element by element, zeros outside the
// matrix. Blocks wholly inside aligned matrices copy every slice that ends inside K
// without checks. Fragments wholly inside C are stored directly; the rest pass through
// a per-warp scratch tile and are copied back with bounds checks.
// kplay: grid=(ceil_div(N,256),ceil_div(M,128)) block=256 smem=156672

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
#define STAGES 3
#endif
#ifndef GROUP_M
#define GROUP_M 8  // 0: blocks take tiles in launch order; g > 0: see block_origin
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 0  // > 0: blocks per SM the register budget must allow; 0: compiler's choice
#endif
#ifndef NTHREADS
#define NTHREADS 256  // threads per block; the launch line's block must match
#endif
#ifndef PREFETCH
#define PREFETCH 1  // 1: next fragments load while the current ones multiply (see main loop)
#endif
#define WARPS_N (NTHREADS / 32 / WARPS_M)
#define WM (BM / WARPS_M)
#define WN (BN / WARPS_N)
#define FM (WM / 16)  // accumulator fragments per warp along M
#define FN (WN / 16)  // and along N
#define PAD 8
#define LDA (BK + PAD)  // shared row lengths, in halves
#define LDB (BN + PAD)
#define A_STAGE (BM * LDA)
#define B_STAGE (BK * LDB)
// Dynamic shared memory: STAGES * (A_STAGE + B_STAGE) * 2 bytes = 156672 by default,
// the value in the kplay line above.

static_assert(FM >= 1 && FN >= 1 && FM * 16 == WM && FN * 16 == WN, "warp tile");
static_assert((BM * BK / 8) % NTHREADS == 0 && (BK * BN / 8) % NTHREADS == 0, "chunks");
static_assert(NTHREADS % (BK / 8) == 0 && NTHREADS % (BN / 8) == 0, "chunk rows");
static_assert(!PREFETCH || (BK / 16) % 2 == 0, "fragment buffers alternate within a slice");

// Which tile of C this block computes. With GROUP_M > 0, consecutive blocks walk down
// GROUP_M block rows before moving one block column right, so the blocks resident at
// one time share fewer distinct slices of A and B and more of their reads hit in L2.
__device__ __forceinline__ void block_origin(int& bm, int& bn) {
#if GROUP_M > 0
    const int tiles_m = gridDim.y, tiles_n = gridDim.x;
    const int id = blockIdx.y * tiles_n + blockIdx.x;
    const int first_m = (id / (GROUP_M * tiles_n)) * GROUP_M;
    const int rows = min(tiles_m - first_m, GROUP_M);
    const int local = id % (GROUP_M * tiles_n);
    bm = (first_m + local % rows) * BM;
    bn = (local / rows) * BN;
#else
    bm = blockIdx.y * BM;
    bn = blockIdx.x * BN;
#endif
}

__device__ __forceinline__ void cp_async16(half* smem, const half* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// One 8-half chunk of a row: rows/cols of the matrix are `rows` x `cols` (ld = cols).
__device__ __forceinline__ void copy_chunk(half* dst, const half* __restrict__ src, int r,
                                           int c, int rows, int cols, bool aligned) {
    if (r < rows && c + 8 <= cols && aligned) {
        cp_async16(dst, src + (size_t)r * cols + c);
    } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
            dst[e] = (r < rows && c + e < cols) ? src[(size_t)r * cols + c + e]
                                                : __float2half(0.0f);
    }
}

// Where this thread's chunks of a slice come from and go to. A thread copies
// A_CHUNKS 8-half chunks of the A slice and B_CHUNKS of the B slice; chunk p of A is
// row a_row + p * A_ROW_STEP of the block tile, column a_col of the slice, and so on.
#define A_CHUNKS (BM * BK / 8 / NTHREADS)
#define B_CHUNKS (BK * BN / 8 / NTHREADS)
#define A_ROW_STEP (NTHREADS / (BK / 8))
#define B_ROW_STEP (NTHREADS / (BN / 8))

// The general path: any slice of any block, bounds checked chunk by chunk.
__device__ __forceinline__ void load_stage_checked(half* As, half* Bs,
                                                   const half* __restrict__ A,
                                                   const half* __restrict__ B, int M, int N,
                                                   int K, int bm, int bn, int k0) {
    const int t = threadIdx.x;
    const bool a_aligned = (K % 8) == 0, b_aligned = (N % 8) == 0;
#pragma unroll
    for (int p = 0; p < A_CHUNKS; ++p) {
        const int r = t / (BK / 8) + p * A_ROW_STEP, c = (t % (BK / 8)) * 8;
        copy_chunk(As + r * LDA + c, A, bm + r, k0 + c, M, K, a_aligned);
    }
#pragma unroll
    for (int p = 0; p < B_CHUNKS; ++p) {
        const int r = t / (BN / 8) + p * B_ROW_STEP, c = (t % (BN / 8)) * 8;
        copy_chunk(Bs + r * LDB + c, B, k0 + r, bn + c, K, N, b_aligned);
    }
}

// The fast path, for a slice that lies wholly inside A and B with aligned rows: no
// checks, and the addresses were worked out once before the main loop. `a` points at
// this thread's first A chunk of slice 0, `b` at its first B chunk of slice 0.
__device__ __forceinline__ void load_stage_fast(half* As, half* Bs, const half* a,
                                                const half* b, int N, int K, int k0) {
    const int t = threadIdx.x;
    const half* as = a + k0;
    const half* bs = b + (size_t)k0 * N;
#pragma unroll
    for (int p = 0; p < A_CHUNKS; ++p)
        cp_async16(As + (t / (BK / 8) + p * A_ROW_STEP) * LDA + (t % (BK / 8)) * 8,
                   as + (size_t)p * A_ROW_STEP * K);
#pragma unroll
    for (int p = 0; p < B_CHUNKS; ++p)
        cp_async16(Bs + (t / (BN / 8) + p * B_ROW_STEP) * LDB + (t % (BN / 8)) * 8,
                   bs + (size_t)p * B_ROW_STEP * N);
}

#if MIN_BLOCKS > 0
#define BOUNDS __launch_bounds__(NTHREADS, MIN_BLOCKS)
#else
#define BOUNDS __launch_bounds__(NTHREADS)
#endif
extern "C" __global__ void BOUNDS
hgemm(const half* __restrict__ A, const half* __restrict__ B, float* __restrict__ C, int M,
      int N, int K) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    half* As = reinterpret_cast<half*>(smem_raw);
    half* Bs = As + STAGES * A_STAGE;

    int bm, bn;
    block_origin(bm, bn);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const int slices = (K + BK - 1) / BK;

    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(acc[i][j], 0.0f);

    // Interior blocks of well-aligned matrices take the unchecked copy for every
    // slice that ends inside K; that is every block and slice but the edges.
    const bool interior = bm + BM <= M && bn + BN <= N && (K % 8) == 0 && (N % 8) == 0;
    const int t = threadIdx.x;
    const half* a_src = A + (size_t)(bm + t / (BK / 8)) * K + (t % (BK / 8)) * 8;
    const half* b_src = B + (size_t)(t / (BN / 8)) * N + bn + (t % (BN / 8)) * 8;
    auto load = [&](int stage, int slice) {
        half* as = As + stage * A_STAGE;
        half* bs = Bs + stage * B_STAGE;
        const int k0 = slice * BK;
        if (interior && k0 + BK <= K)
            load_stage_fast(as, bs, a_src, b_src, N, K, k0);
        else
            load_stage_checked(as, bs, A, B, M, N, K, bm, bn, k0);
    };

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

#if PREFETCH
    // Prologue: every stage gets a slice in flight (a group per slice, committed even
    // when empty so that the counts below hold), then the first slice is waited for.
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
        if (s < slices) load(s, s);
        cp_async_commit();
    }
    cp_async_wait<STAGES - 1>();
    __syncthreads();
    FragA a[2][FM];
    FragB b[2][FN];
    load_frags(a[0], b[0], 0, 0);
    int read = 0;
    for (int s = 0; s < slices; ++s) {
#pragma unroll
        for (int q = 0; q < BK / 16; ++q) {
            const int cur = q & 1;
            if (q + 1 < BK / 16) {
                load_frags(a[cur ^ 1], b[cur ^ 1], read, (q + 1) * 16);
            } else {
                // The last step of the slice: its fragments are already in registers, so
                // the stage can be refilled once every warp has read it (the barrier),
                // and the next slice's first fragments load while this step multiplies.
                cp_async_wait<STAGES - 2>();
                __syncthreads();
                const int freed = read;
                read = read + 1 == STAGES ? 0 : read + 1;
                if (s + STAGES < slices) load(freed, s + STAGES);
                cp_async_commit();
                if (s + 1 < slices) load_frags(a[cur ^ 1], b[cur ^ 1], read, 0);
            }
            mma(a[cur], b[cur]);
        }
    }
#else
    // Prologue: put the first STAGES - 1 slices in flight. A group is committed even
    // when empty so that "wait until at most STAGES - 2 groups are pending" always
    // means "the oldest slice has landed".
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < slices) load(s, s);
        cp_async_commit();
    }

    int read = 0, write = STAGES - 1;  // stages being read and refilled, kept without %
    for (int s = 0; s < slices; ++s) {
        cp_async_wait<STAGES - 2>();
        // Makes this thread's landed copies and plain stores visible to all warps, and
        // tells us every warp has finished with the stage about to be refilled.
        __syncthreads();
        if (s + STAGES - 1 < slices) load(write, s + STAGES - 1);
        cp_async_commit();

#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            FragA a[FM];
            FragB b[FN];
            load_frags(a, b, read, kk);
            mma(a, b);
        }
        read = read + 1 == STAGES ? 0 : read + 1;
        write = write + 1 == STAGES ? 0 : write + 1;
    }
#endif
    cp_async_wait<0>();
    __syncthreads();  // the pipeline's shared memory is reused as scratch below

    // Direct stores need 32-byte aligned rows (N % 8 == 0) and a fragment inside C.
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
}
