// kplay: grid=(ceil_div(N,128),ceil_div(M,128)) block=256 smem=132096 tma.A=(128,64) tma.A.swizzle=128B tma.B=(64,64) tma.B.swizzle=128B
// C = A @ B with TMA loads and wgmma, in its plainest warp-specialised form: one block
// per 128 x 128 tile of C, one producer warpgroup and one consumer warpgroup.
//
// The launch line asks the engine for TMA descriptors in place of the pointers A and B.
// A (M x K, K contiguous) comes in boxes of 128 rows x 64 columns: 64 bf16 are 128
// bytes, one 128-byte swizzle span, so each box row is one row of GMMA's K-major SW128
// atom. B (K x N, N contiguous) comes in boxes of 64 k-rows x 64 columns, two per tile;
// each box is one column of MN-major SW128 atoms, which is why B's shared layout stacks
// its atoms along K first (Step<_2,_1>) and then along N.
//
// Per stage 128x64 + 64x128 bf16 = 32 KiB; four stages are 128 KiB, plus 1 KiB to put
// the ring on the 1024-byte boundary the 128-byte swizzle needs. One thread of the
// producer warpgroup issues the copies; the consumer warpgroup multiplies each stage
// with two 64x128x16 wgmma per 16-wide k step (its 128 rows are two 64-row halves),
// waits for them, and hands the stage back at once, so only the loads overlap the math.
// TMA fills the parts of a box outside A or B with zeros, so edge tiles need no special
// loads; the epilogue stores only inside C. K and N are multiples of 8 (16-byte rows).

#define NDEBUG
#include <cuda.h>
#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cutlass/arch/barrier.h>
#include <cutlass/bfloat16.h>

using namespace cute;

namespace {

using Element = cutlass::bfloat16_t;
constexpr int kBM = 128, kBN = 128, kBK = 64, kStages = 4;
constexpr int kBoxN = 64;                        // B's box is 64 (k) x 64 (n)
constexpr int kStageA = kBM * kBK, kStageB = kBN * kBK;            // elements
constexpr uint32_t kStageBytes = (kStageA + kStageB) * sizeof(Element);
constexpr int kSmemBytes = kStages * kStageBytes + 1024;            // the directive's smem
static_assert(kSmemBytes == 132096, "keep the kplay line's smem in step");
constexpr uint64_t kEvictNormal = uint64_t(TMA::CacheHintSm90::EVICT_NORMAL);

using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                           Shape<Int<kBM>, Int<kBK>, Int<kStages>>{}));
using SmemLayoutB = decltype(tile_to_shape(GMMA::Layout_MN_SW128_Atom<Element>{},
                                           Shape<Int<kBN>, Int<kBK>, Int<kStages>>{},
                                           Step<_2, _1, _3>{}));
static_assert(cosize(SmemLayoutA{}) == kStages * kStageA);
static_assert(cosize(SmemLayoutB{}) == kStages * kStageB);

// One warpgroup; the 128-row tile is two 64-row wgmma along M.
using TiledMma = decltype(make_tiled_mma(
    SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{}));

using Barrier = cutlass::arch::ClusterBarrier;
using TxBarrier = cutlass::arch::ClusterTransactionBarrier;

}  // namespace

extern "C" __global__ void __launch_bounds__(256, 1)
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
    Element* smem_b = ring + kStages * kStageA;      // kStages x 16 KiB

    if (threadIdx.x == 0) {
        for (int s = 0; s < kStages; ++s) {
            Barrier::init(&full[s], 1);    // the producer's arrive, then TMA's bytes
            Barrier::init(&empty[s], 4);   // one arrive per consumer warp
        }
        cutlass::arch::fence_barrier_init();
    }
    __syncthreads();

    const int tm = blockIdx.y, tn = blockIdx.x;
    const int k_tiles = (K + kBK - 1) / kBK;

    if (threadIdx.x < 128) {
        // Producer: one thread issues every copy; the rest of its warpgroup is idle.
        if (threadIdx.x != 0) return;
        int stage = 0;
        uint32_t phase = 0;
        for (int kt = 0; kt < k_tiles; ++kt) {
            Barrier::wait(&empty[stage], phase ^ 1);  // a new barrier passes parity 1
            TxBarrier::arrive_and_expect_tx(&full[stage], kStageBytes);
            const int k0 = kt * kBK;
            // Coordinates go innermost first: (column, row).
            SM90_TMA_LOAD_2D::copy(&A, &full[stage], kEvictNormal, smem_a + stage * kStageA,
                                   k0, tm * kBM);
            CUTE_UNROLL
            for (int j = 0; j < kBN / kBoxN; ++j) {
                SM90_TMA_LOAD_2D::copy(&B, &full[stage], kEvictNormal,
                                       smem_b + stage * kStageB + j * kBoxN * kBK,
                                       tn * kBN + j * kBoxN, k0);
            }
            if (++stage == kStages) { stage = 0; phase ^= 1; }
        }
        return;
    }

    // Consumer.
    const int mma_thread = threadIdx.x - 128;
    Tensor sA = make_tensor(make_smem_ptr(smem_a), SmemLayoutA{});  // (BM, BK, stage)
    Tensor sB = make_tensor(make_smem_ptr(smem_b), SmemLayoutB{});  // (BN, BK, stage)
    TiledMma mma;
    auto thr = mma.get_thread_slice(mma_thread);
    Tensor tCrA = thr.make_fragment_A(thr.partition_A(sA));  // wgmma descriptors
    Tensor tCrB = thr.make_fragment_B(thr.partition_B(sB));
    Tensor acc = partition_fragment_C(mma, Shape<Int<kBM>, Int<kBN>>{});
    mma.accumulate_ = GMMA::ScaleOut::Zero;

    int stage = 0;
    uint32_t phase = 0;
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
        warpgroup_wait<0>();  // this stage is read: give it back
        warpgroup_fence_operand(acc);
        if (threadIdx.x % 32 == 0) Barrier::arrive(&empty[stage]);
        if (++stage == kStages) { stage = 0; phase ^= 1; }
    }

    // Epilogue: two neighbouring columns per store, only inside C (N is even, so a pair
    // starts inside C only if it ends there).
    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), _1{}));
    Tensor gC = local_tile(mC, Shape<Int<kBM>, Int<kBN>>{}, make_coord(tm, tn));
    Tensor cC = local_tile(make_identity_tensor(make_shape(M, N)), Shape<Int<kBM>, Int<kBN>>{},
                           make_coord(tm, tn));
    Tensor tCgC = thr.partition_C(gC);
    Tensor tCcC = thr.partition_C(cC);
    CUTE_UNROLL
    for (int i = 0; i < size(acc); i += 2) {
        if (elem_less(tCcC(i), make_coord(M, N))) {
            *reinterpret_cast<float2*>(&tCgC(i)) = make_float2(acc(i), acc(i + 1));
        }
    }
}
