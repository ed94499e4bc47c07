// C = A @ B with a CUTLASS 3 collective mainloop: bf16 in, fp32 accumulate and out.
// The mainloop is CUTLASS's Hopper cp.async + GMMA collective
// (MainloopSm90CpAsyncGmmaWarpSpecialized). TMA is left out on purpose: its tensor
// maps are built on the host, and here the engine launches the kernel with nothing
// but pointers and sizes. One producer warpgroup copies tiles of A and B into a
// five-stage shared-memory ring; two consumer warpgroups each multiply a 64x128 half
// of the 128x128 tile with wgmma, then write their accumulators to C, guarded at the
// edges. K and N must be multiples of 8 (16-byte rows for cp.async); M may be anything.
// kplay: grid=(ceil_div(N,128),ceil_div(M,128)) block=384 smem=168960

#define NDEBUG  // no assert() calls: a call inside the wgmma loop serialises it
#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>
#include <cutlass/gemm/dispatch_policy.hpp>
#include <cutlass/gemm/collective/collective_mma_decl.hpp>
#include <cutlass/gemm/collective/sm90_mma_multistage_gmma_ss_warpspecialized.hpp>
#include <cutlass/pipeline/pipeline.hpp>

using namespace cute;

namespace {

using Element = cutlass::bfloat16_t;
using TileMNK = Shape<_128, _128, _64>;            // BLK_M, BLK_N, BLK_K
constexpr int kStages = 5;
constexpr int kWarpGroup = 128;
constexpr int kSmemBytes = 168960;               // the directive's smem: storage + 1 KiB to align

// A is M x K row-major: K is its contiguous mode. B is K x N row-major, seen as (N, K):
// N is contiguous. The third mode (a batch) is unused.
using StrideA = Stride<int64_t, _1, int64_t>;
using StrideB = Stride<_1, int64_t, int64_t>;

// Two warpgroups side by side along M, each issuing 64x128x16 wgmma from shared memory.
using Mma = decltype(make_tiled_mma(
    SM90_64x128x16_F32BF16BF16_SS<GMMA::Major::K, GMMA::Major::MN>{}, Layout<Shape<_2, _1, _1>>{}));

// 16-byte cp.async; 128 producer threads cover a 16x64 slab of A and a 128x8 slab of B a pass.
using CopyAtom = Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL<uint128_t>, Element>;
using CopyA = decltype(make_tiled_copy(CopyAtom{}, Layout<Shape<_16, _8>, Stride<_8, _1>>{},
                                       Layout<Shape<_1, _8>>{}));
using CopyB = decltype(make_tiled_copy(CopyAtom{}, Layout<Shape<_16, _8>, Stride<_1, _16>>{},
                                       Layout<Shape<_8, _1>>{}));

using Mainloop = cutlass::gemm::collective::CollectiveMma<
    cutlass::gemm::MainloopSm90CpAsyncGmmaWarpSpecialized<
        kStages, Shape<_1, _1, _1>, cutlass::gemm::KernelCpAsyncWarpSpecializedCooperative>,
    TileMNK, Element, StrideA, Element, StrideB, Mma,
    CopyA, GMMA::Layout_K_SW128_Atom<Element>, void, cute::identity,
    CopyB, GMMA::Layout_MN_SW128_Atom<Element>, void, cute::identity>;

using Pipeline = typename Mainloop::MainloopPipeline;

struct Storage {
    typename Mainloop::TensorStorage tensors;
    typename Mainloop::PipelineStorage pipeline;
};
static_assert(sizeof(Storage) + 1024 <= kSmemBytes, "raise smem in the kplay directive");

}  // namespace

extern "C" __global__ void __launch_bounds__(384, 1)
gemm_bf16(const Element* A, const Element* B, float* C, int M, int N, int K) {
    // The swizzled tiles want a 1024-byte aligned base; the launch gives 1 KiB to spare.
    extern __shared__ unsigned char smem_raw[];
    uint32_t dynamic_bytes;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dynamic_bytes));
    if (dynamic_bytes < kSmemBytes) __trap();  // launched with too little shared memory
    uint32_t base = cast_smem_ptr_to_uint(smem_raw);
    Storage& storage = *reinterpret_cast<Storage*>(smem_raw + ((1024 - (base & 1023)) & 1023));

    const int thread = threadIdx.x;
    const int group = cutlass::canonical_warp_group_idx();  // 0: producer, 1 and 2: consumers
    const bool producer = group == 0;

    typename Pipeline::Params pipe_params;
    pipe_params.role = producer ? Pipeline::ThreadCategory::Producer
                                : Pipeline::ThreadCategory::Consumer;
    pipe_params.producer_arv_count = kWarpGroup;
    pipe_params.consumer_arv_count = 2 * kWarpGroup;
    Pipeline pipeline(storage.pipeline, pipe_params);
    __syncthreads();  // barriers initialised before anyone waits on them

    // Whole-problem tensors, then this block's (BLK, BLK_K, k) slices of A and B.
    Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K, 1),
                            StrideA{int64_t(K), _1{}, int64_t(M) * K});
    Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K, 1),
                            StrideB{_1{}, int64_t(N), int64_t(K) * N});
    const int m_blk = blockIdx.y, n_blk = blockIdx.x;
    Tensor gA = local_tile(mA(_, _, 0), select<0, 2>(TileMNK{}), make_coord(m_blk, _));
    Tensor gB = local_tile(mB(_, _, 0), select<1, 2>(TileMNK{}), make_coord(n_blk, _));
    const int k_tiles = size<2>(gA);

    Mainloop mainloop;
    if (producer) {
        // Rows and columns left in this tile, and how far the k tiles overhang K (<= 0):
        // the collective shifts the k tiles so that the partial one comes first.
        auto residue = make_tuple(M - 128 * m_blk, N - 128 * n_blk, K - 64 * k_tiles);
        auto write = cutlass::make_producer_start_state<Pipeline>();
        mainloop.load(pipeline, write, gA, gB, make_coord_iterator(shape<2>(gA)), k_tiles,
                      residue, thread, storage.tensors);
        write.advance(k_tiles);
        mainloop.load_tail(pipeline, write);
        return;
    }

    const int mma_thread = thread - kWarpGroup;  // 0..255 across the two consumers
    Mma mma;
    Tensor acc = partition_fragment_C(mma, select<0, 1>(TileMNK{}));
    typename Mainloop::PipelineState read;
    typename Mainloop::Params params{};
    mainloop.mma(pipeline, read, acc, k_tiles, mma_thread, storage.tensors, params);
    mainloop.mma_tail(pipeline, read, k_tiles);

    // Epilogue: each consumer thread writes the accumulators it holds, inside C only.
    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), _1{}));
    Tensor gC = local_tile(mC, select<0, 1>(TileMNK{}), make_coord(m_blk, n_blk));
    Tensor cC = local_tile(make_identity_tensor(make_shape(M, N)), select<0, 1>(TileMNK{}),
                           make_coord(m_blk, n_blk));
    auto slice = mma.get_thread_slice(mma_thread);
    Tensor tCgC = slice.partition_C(gC);
    Tensor tCcC = slice.partition_C(cC);
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) {
        if (elem_less(tCcC(i), make_coord(M, N))) tCgC(i) = acc(i);
    }
}
