// WRONG: counts whole 32-wide slices of K only (K / 32, rounded down), so the last
// K % 32 columns of A and rows of B never reach the product. Right whenever K is a
// multiple of 32, which the large cases are; wrong on K = 8, 40, 200...
// kplay: grid=(ceil_div(N,64),ceil_div(M,64)) block=128 smem=0

#include <cute/tensor.hpp>
#include <cutlass/bfloat16.h>

using namespace cute;
using Element = cutlass::bfloat16_t;

extern "C" __global__ void __launch_bounds__(128)
gemm_bf16(const Element* A, const Element* B, float* C, int M, int N, int K) {
    using BM = _64;
    using BN = _64;
    using BK = _32;
    // Rows padded by 8 elements so that neighbouring rows start in other banks.
    __shared__ Element a_tile[64 * 40];
    __shared__ Element b_tile[32 * 72];
    Tensor sA = make_tensor(make_smem_ptr(a_tile), Layout<Shape<BM, BK>, Stride<_40, _1>>{});
    Tensor sB = make_tensor(make_smem_ptr(b_tile), Layout<Shape<BN, BK>, Stride<_1, _72>>{});

    // A as (M, K), B as (N, K) with N contiguous, C as (M, N); and their coordinates.
    Tensor mA = make_tensor(make_gmem_ptr(A), make_shape(M, K), make_stride(int64_t(K), _1{}));
    Tensor mB = make_tensor(make_gmem_ptr(B), make_shape(N, K), make_stride(_1{}, int64_t(N)));
    Tensor mC = make_tensor(make_gmem_ptr(C), make_shape(M, N), make_stride(int64_t(N), _1{}));
    auto here = make_coord(int(blockIdx.y), int(blockIdx.x));
    Tensor gA = local_tile(mA, Shape<BM, BK>{}, make_coord(get<0>(here), _));   // (64,32,k)
    Tensor gB = local_tile(mB, Shape<BN, BK>{}, make_coord(get<1>(here), _));   // (64,32,k)
    Tensor gC = local_tile(mC, Shape<BM, BN>{}, here);                           // (64,64)
    Tensor cA = local_tile(make_identity_tensor(shape(mA)), Shape<BM, BK>{}, make_coord(get<0>(here), _));
    Tensor cB = local_tile(make_identity_tensor(shape(mB)), Shape<BN, BK>{}, make_coord(get<1>(here), _));
    Tensor cC = local_tile(make_identity_tensor(shape(mC)), Shape<BM, BN>{}, here);

    // Loading: A's threads run along K (its contiguous mode), B's along N.
    const int t = threadIdx.x;
    auto a_threads = Layout<Shape<_16, _8>, Stride<_8, _1>>{};
    auto b_threads = Layout<Shape<_32, _4>, Stride<_1, _32>>{};
    Tensor tAgA = local_partition(gA, a_threads, t);
    Tensor tAcA = local_partition(cA, a_threads, t);
    Tensor tAsA = local_partition(sA, a_threads, t);
    Tensor tBgB = local_partition(gB, b_threads, t);
    Tensor tBcB = local_partition(cB, b_threads, t);
    Tensor tBsB = local_partition(sB, b_threads, t);

    TiledMMA mma = make_tiled_mma(SM80_16x8x16_F32BF16BF16F32_TN{}, Layout<Shape<_2, _2, _1>>{});
    ThrMMA thr = mma.get_slice(t);
    Tensor tCsA = thr.partition_A(sA);
    Tensor tCsB = thr.partition_B(sB);
    Tensor tCrA = thr.partition_fragment_A(sA);
    Tensor tCrB = thr.partition_fragment_B(sB);
    Tensor acc = thr.partition_fragment_C(gC);
    clear(acc);

    const int k_tiles = K / 32;  // drops a partial last slice
    for (int kt = 0; kt < k_tiles; ++kt) {
        Tensor a_src = tAgA(_, _, kt);
        Tensor a_at = tAcA(_, _, kt);
        Tensor b_src = tBgB(_, _, kt);
        Tensor b_at = tBcB(_, _, kt);
        CUTE_UNROLL
        for (int i = 0; i < size(tAsA); ++i)
            tAsA(i) = elem_less(a_at(i), shape(mA)) ? a_src(i) : Element(0.0f);
        CUTE_UNROLL
        for (int i = 0; i < size(tBsB); ++i)
            tBsB(i) = elem_less(b_at(i), shape(mB)) ? b_src(i) : Element(0.0f);
        __syncthreads();
        copy(tCsA, tCrA);
        copy(tCsB, tCrB);
        gemm(mma, tCrA, tCrB, acc);
        __syncthreads();  // the tiles are read before the next slice overwrites them
    }

    Tensor tCgC = thr.partition_C(gC);
    Tensor tCcC = thr.partition_C(cC);
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i)
        if (elem_less(tCcC(i), shape(mC))) tCgC(i) = acc(i);
}
