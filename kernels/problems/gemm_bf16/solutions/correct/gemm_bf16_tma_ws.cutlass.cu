// kplay: grid=(min(132,ceil_div(M,128)*ceil_div(N,256))) block=384 smem=197632 tma.A=(128,64) tma.A.swizzle=128B tma.A.l2=256B tma.B=(64,64) tma.B.swizzle=128B tma.B.l2=256B
// C = A @ B on Hopper the way the fast libraries do it: the Tensor Memory Accelerator
// moves tiles of A and B into shared memory, wgmma multiplies them straight from there,
// and the block's warpgroups split the two jobs (warp specialisation).
//
// The launch line asks the engine for two TMA descriptors in place of the pointers A and
// B. A (M x K, K contiguous) is copied in boxes of 128 rows x 64 columns: 64 bf16 are
// 128 bytes, exactly one 128-byte swizzle span, so every box row lands in shared memory
// as one row of GMMA's K-major SW128 atom. B (K x N, N contiguous) is copied in boxes of
// 64 k-rows x 64 columns, four per 256-wide tile; each box is one column of MN-major
// SW128 atoms (N contiguous, K at 128 bytes), which is why B's shared layout stacks its
// atoms along K first (Step<_2,_1>) and only then along N.
//
// Tile 128 x 256 x 64. Per stage that is 128x64 + 64x256 bf16 = 16 + 32 = 48 KiB; four
// stages are 192 KiB of the 227 KiB a block may have (a fifth would not fit), plus 1 KiB
// so that the ring can start on a 1024-byte boundary, as the 128-byte swizzle needs.
// One stage feeds 128*256*64 = 2 Mi multiply-adds (4 Mi flops) for its 48 KiB: about
// 85 flops per byte of shared memory filled, enough to keep wgmma busy while TMA refills
// the ring.
//
// 384 threads: warpgroup 0 is the producer (one thread issues every TMA copy, the other
// registers are handed back with setmaxnreg), warpgroups 1 and 2 are consumers, each
// owning 64 rows x 256 columns of the tile (64x256x16 wgmma, 128 fp32 accumulators per
// thread). Stage s has a "full" mbarrier (TMA's byte count completes it) and an "empty"
// one (every consumer warp arrives once it has read the stage).
//
// Persistent: 132 blocks (one per H200 SM; fewer when there are fewer tiles) walk the
// tiles with a stride of the grid. The producer runs ahead into the next tile while the
// consumers write the last one's results, so the epilogue hides behind the loads. Tiles
// are visited in groups of 8 tile-rows, column by column inside a group, so that blocks
// running together share panels of A and B in L2. Edge tiles need no special code on the
// load side: TMA fills the parts of a box outside A or B with zeros (and still counts
// the whole box's bytes), so a partial K or M tile adds zeros; the epilogue stores only
// inside C. K and N are multiples of 8: every row is a multiple of 16 bytes, as TMA needs.

#define NDEBUG
#include <cuda.h>
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>
#include <cutlass/bfloat16.h>

using namespace cute;

namespace {

using Element = cutlass::bfloat16_t;
constexpr int kBM = 128, kBN = 256, kBK = 64, kStages = 4;
constexpr int kConsumers = 2;                    // consumer warpgroups, 64 rows each
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kBoxN = 64;                        // B's box is 64 (k) x 64 (n)
constexpr int kGroupM = 8;                       // tile-rows per raster group
constexpr int kStageA = kBM * kBK, kStageB = kBN * kBK;            // elements
constexpr uint32_t kStageBytes = (kStageA + kStageB) * sizeof(Element);
constexpr int kSmemBytes = kStages * kStageBytes + 1024;            // the directive's smem
static_assert(kSmemBytes == 197632, "keep the kplay line's smem in step");
constexpr uint64_t kEvictNormal = uint64_t(TMA::CacheHintSm90::EVICT_NORMAL);

using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                           Shape<Int<kBM>, Int<kBK>, Int<kStages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                           Shape<Int<kBN>, Int<kBK>, Int<kStages>>{},
                                           Step<_2, _1, _3>{}));
static_assert(cosize(SmemLayoutA{}) == kStages * kStageA);
static_assert(cosize(SmemLayoutB{}) == kStages * kStageB);

// Consumer warpgroups side by side along M; A is K-major, B (seen as N x K) MN-major.
using TiledMma = decltype(make_tiled_mma(
    SM90_64x256x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{},
    Layout<Shape<Int<kConsumers>, _1, _1>>{}));

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

// Tile t of the walk -> (tile-row, tile-column): groups of kGroupM tile-rows, and inside
// a group the rows vary fastest.
__device__ __forceinline__ void tile_coord(int t, int tiles_m, int tiles_n, int& tm, int& tn) {
    const int per_group = kGroupM * tiles_n;
    const int first = (t / per_group) * kGroupM;
    const int rows = min(tiles_m - first, kGroupM);
    const int r = t % per_group;
    tm = first + r % rows;
    tn = r / rows;
}

}  // namespace

extern "C" __global__ void __launch_bounds__(kThreads, 1)
gemm_bf16(const __grid_constant__ CUtensorMap A, const __grid_constant__ CUtensorMap B,
          float* C, int M, int N, int K) {
    extern __shared__ unsigned char smem_raw[];
    __shared__ uint64_t full[kStages], empty[kStages];
    uint32_t dynamic_bytes;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    if (dynamic_bytes < kSmemBytes) __trap();  // launched with too little shared memory
    const uint32_t base = cast_smem_ptr_to_uint(smem_raw);
    Element* ring = reinterpret_cast<Element*>(smem_raw + ((1024 - (base & 1023)) & 1023));
    Element* smem_a = ring;                          // kStages x 16 KiB
    Element* smem_b = ring + kStages * kStageA;      // kStages x 32 KiB

    const int warp_group = threadIdx.x / 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            Barrier::init(&full[s], 1);                  // the producer's arrive + TMA bytes
            Barrier::init(&empty[s], 4 * kConsumers);    // one arrive per consumer warp
        }
        cutlass::arch::fence_barrier_init();
    }
    __syncthreads();

    const int tiles_m = (M + kBM - 1) / kBM, tiles_n = (N + kBN - 1) / kBN;
    const int tiles = tiles_m * tiles_n, k_tiles = (K + kBK - 1) / kBK;

    if (warp_group == 0) {
        // Producer: 40 registers are plenty for address arithmetic.
        cutlass::arch::warpgroup_reg_dealloc<40>();
        if (threadIdx.x != 0) return;
        prefetch_tma_descriptor(&A);
        prefetch_tma_descriptor(&B);
        int stage = 0;
        uint32_t phase = 0;
        for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
            int tm, tn;
            tile_coord(t, tiles_m, tiles_n, tm, tn);
            for (int kt = 0; kt < k_tiles; ++kt) {
                Barrier::wait(&empty[stage], phase ^ 1);  // a new barrier passes parity 1
                TxBarrier::arrive_and_expect_tx(&full[stage], kStageBytes);
                const int k0 = kt * kBK;
                // Coordinates go innermost first: (column, row).
                SM90_TMA_LOAD_2D::copy(&A, &full[stage], kEvictNormal,
                                       smem_a + stage * kStageA, k0, tm * kBM);
                CUTE_UNROLL
                for (int j = 0; j < kBN / kBoxN; ++j) {
                    SM90_TMA_LOAD_2D::copy(&B, &full[stage], kEvictNormal,
                                           smem_b + stage * kStageB + j * kBoxN * kBK,
                                           tn * kBN + j * kBoxN, k0);
                }
                if (++stage == kStages) { stage = 0; phase ^= 1; }
            }
        }
        return;
    }

    // Consumers: the accumulators need the registers the producer gave back.
    cutlass::arch::warpgroup_reg_alloc<232>();
    const int mma_thread = threadIdx.x - 128;
    const bool warp_leader = (threadIdx.x % 32) == 0;
    Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA{});  // (BM, BK, stage)
    Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB{});  // (BN, BK, stage)
    TiledMma mma;
    auto thr = mma.get_thread_slice(mma_thread);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // wgmma descriptors
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});

    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), _1{}));
    Tensor cC = make_identity_tensor(make_shape(M, N));

    int stage = 0;
    uint32_t phase = 0;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int tm, tn;
        tile_coord(t, tiles_m, tiles_n, tm, tn);
        mma.accumulate_ = GMMA::ScaleOut::Zero;
        int prev = -1;
        for (int kt = 0; kt < k_tiles; ++kt) {
            Barrier::wait(&full[stage], phase);
            warpgroup_fence_operand(acc);
            warpgroup_arrive();
            CUTE_UNROLL
            for (int kb = 0; kb < size<2>(tCrA); ++kb) {
                cute::gemm(mma, tCrA(_, _, kb, stage), tCrB(_, _, kb, stage), acc);
                mma.accumulate_ = GMMA::ScaleOut::One;
            }
            warpgroup_commit_batch();
            // Keep this stage's wgmma in flight; the one before it has finished reading
            // its stage, which can go back to the producer.
            warpgroup_wait<1>();
            warpgroup_fence_operand(acc);
            if (prev >= 0 && warp_leader) Barrier::arrive(&empty[prev]);
            prev = stage;
            if (++stage == kStages) { stage = 0; phase ^= 1; }
        }
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc);
        if (prev >= 0 && warp_leader) Barrier::arrive(&empty[prev]);

        // Epilogue: two neighbouring columns per store, only inside C (N is even, so a
        // pair starts inside C only if it ends there).
        Tensor gC = local_tile(mC, Shape<Int<kBM>, Int<kBN>>{}, make_coord(tm, tn));
        Tensor tile_c = local_tile(cC, Shape<Int<kBM>, Int<kBN>>{}, make_coord(tm, tn));
        Tensor tCgC = thr.partition_C(gC);
        Tensor tCcC = thr.partition_C(tile_c);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); i += 2) {
            if (elem_less(tCcC(i), make_coord(M, N))) {
                *reinterpret_cast<float2*>(&tCgC(i)) = make_float2(acc(i), acc(i + 1));
            }
        }
    }
}
