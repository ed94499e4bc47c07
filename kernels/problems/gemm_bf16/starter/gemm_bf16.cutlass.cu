// C = A @ B with A (M x K) and B (K x N) bfloat16, C (M x N) float32, row-major, in CuTe.
// A block of 128 threads (four warps) owns a 64x64 tile of C and walks K in 32-wide
// slices, staging each slice of A and B in shared memory with zeros past the edges.
// The tensors, tiles and copies are written for you; the tensor-core part is yours.
// K and N are multiples of 8; M may be anything.
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

    // TODO (1): build a TiledMMA from the tensor-core atom SM80_16x8x16_F32BF16BF16F32_TN
    //           with four warps laid out 2 x 2 (Layout<Shape<_2,_2,_1>>), take this
    //           thread's slice, partition sA, sB and gC with it, make register
    //           fragments for A and B and an accumulator for C, and clear it.

    const int k_tiles = size<2>(gA);
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
        // TODO (2): copy this thread's parts of the shared tiles into its fragments,
        //           then multiply them into the accumulator with cute::gemm.
        __syncthreads();  // the tiles are read before the next slice overwrites them
    }

    // TODO (3): partition gC and the coordinate tensor cC like the accumulator and
    //           store every accumulator element whose coordinate lies inside C.
}
