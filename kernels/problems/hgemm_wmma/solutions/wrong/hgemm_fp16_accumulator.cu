// WRONG: the accumulator fragment is fp16. Every mma_sync rounds the running sum to
// 11 significant bits, so for long K the result drifts far outside the tolerance
// (short K often still passes: the damage grows with the number of slices).
// kplay: grid=(ceil_div(N,16),ceil_div(M,16)) block=32 smem=0

#include <mma.h>
#include <cuda_fp16.h>
using namespace nvcuda;

extern "C" __global__ void hgemm(const half* __restrict__ A, const half* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(32) half As[16 * 16];
    __shared__ __align__(32) half Bs[16 * 16];
    __shared__ __align__(32) half Cs[16 * 16];
    const int lane = threadIdx.x;
    const int row0 = blockIdx.y * 16, col0 = blockIdx.x * 16;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, half> acc;
    wmma::fill_fragment(acc, __float2half(0.0f));
    for (int k0 = 0; k0 < K; k0 += 16) {
        for (int e = lane; e < 256; e += 32) {
            const int r = e / 16, c = e % 16;
            As[e] = (row0 + r < M && k0 + c < K) ? A[(size_t)(row0 + r) * K + k0 + c]
                                                 : __float2half(0.0f);
            Bs[e] = (k0 + r < K && col0 + c < N) ? B[(size_t)(k0 + r) * N + col0 + c]
                                                 : __float2half(0.0f);
        }
        __syncwarp();
        wmma::load_matrix_sync(a, As, 16);
        wmma::load_matrix_sync(b, Bs, 16);
        wmma::mma_sync(acc, a, b, acc);
        __syncwarp();
    }
    wmma::store_matrix_sync(Cs, acc, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = row0 + e / 16, c = col0 + e % 16;
        if (r < M && c < N) C[(size_t)r * N + c] = __half2float(Cs[e]);
    }
}
