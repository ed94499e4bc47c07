// One warp per 16x16 tile of C, one accumulator fragment, tiles staged in shared memory.
//
// The tensor core multiplies whole 16x16 fp16 tiles, and load_matrix_sync reads a
// whole tile, so a warp first copies its 16x16 pieces of A and B into shared memory,
// writing zeros wherever a row or column lies past the edge of the matrix. The same
// trick works on the way out: the accumulator goes to a 16x16 scratch tile and only
// the elements inside C are copied back. Correct for any M, N, K; slow, because every
// value is fetched from global memory by every warp that needs it.
// kplay: grid=(ceil_div(N,16),ceil_div(M,16)) block=32 smem=0

#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

extern "C" __global__ void hgemm(const half* __restrict__ A, const half* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    // 32-byte alignment is what load_matrix_sync / store_matrix_sync require.
    __shared__ __align__(32) half As[16 * 16];
    __shared__ __align__(32) half Bs[16 * 16];
    __shared__ __align__(32) float Cs[16 * 16];
    const int lane = threadIdx.x;
    const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 16;

    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);

    for (int k0 = 0; k0 < K; k0 += 16) {
        // 256 elements per tile, 8 per lane; lanes take consecutive columns.
        for (int e = lane; e < 256; e += 32) {
            const int r = e / 16, c = e % 16;
            const int ar = row0 + r, ak = k0 + c;
            As[e] = (ar < M && ak < K) ? A[(size_t)ar * K + ak] : __float2half(0.0f);
            const int bk = k0 + r, bc = col0 + c;
            Bs[e] = (bk < K && bc < N) ? B[(size_t)bk * N + bc] : __float2half(0.0f);
        }
        __syncwarp();
        wmma::load_matrix_sync(a, As, 16);
        wmma::load_matrix_sync(b, Bs, 16);
        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();  // the next copy must not overwrite tiles still being loaded
    }

    wmma::store_matrix_sync(Cs, acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = row0 + e / 16, c = col0 + e % 16;
        if (r < M && c < N) C[(size_t)r * N + c] = Cs[e];
    }
}
