// WRONG: the default launch has 32x8 threads per 32x32 tile, but this kernel moves
// only one element per thread, as if the block were 32x32. Rows 8..31 of every tile
// are never written, so three quarters of the output keep whatever was there before.

#define TILE 32

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    if (row0 + ty < rows && col0 + tx < cols) {
        tile[ty][tx] = inp[(size_t)(row0 + ty) * cols + col0 + tx];
    }
    __syncthreads();
    if (col0 + ty < cols && row0 + tx < rows) {
        out[(size_t)(col0 + ty) * rows + row0 + tx] = tile[tx][ty];
    }
}
