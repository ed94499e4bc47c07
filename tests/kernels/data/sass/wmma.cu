// One warp multiplies two 16x16 fp16 tiles with the WMMA API: the older tensor-core
// path (mma.sync), which Hopper still runs but not at its full rate.
#include <cuda_fp16.h>
#include <mma.h>

extern "C" __global__ void wmma_tile(const __half* a, const __half* b, float* c)
{
    using namespace nvcuda;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> fc;
    wmma::fill_fragment(fc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(c, fc, 16, wmma::mem_row_major);
}
