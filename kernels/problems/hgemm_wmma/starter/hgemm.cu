// C = A @ B on tensor cores: A (M x K) and B (K x N) fp16, C (M x N) fp32, row-major.
// The default launch gives each warp (a block of 32 threads) one 16x16 tile of C:
// block (bx, by) owns rows by*16 .. by*16+15 and columns bx*16 .. bx*16+15.
// Shared-memory staging and the edge handling are written for you; the tensor-core
// part, between the TODO markers, is yours.
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

    // TODO (1): declare three fragments: matrix_a and matrix_b (16x16x16, half,
    //           row_major) and an accumulator (16x16x16, float); fill the
    //           accumulator with zeros.

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
        // TODO (2): load the A and B fragments from As and Bs (16 elements per row)
        //           and accumulate their product into the accumulator.

        __syncwarp();  // the next copy must not overwrite tiles still being loaded
    }

    // TODO (3): store the accumulator into Cs, row-major with 16 elements per row.

    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = row0 + e / 16, c = col0 + e % 16;
        if (r < M && c < N) C[(size_t)r * N + c] = Cs[e];
    }
}
