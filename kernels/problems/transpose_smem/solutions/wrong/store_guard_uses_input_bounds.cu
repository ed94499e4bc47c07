// WRONG: the store is guarded with the input's bounds (orow < rows, oc < cols) instead of
// the output's (orow < cols, oc < rows). On a square matrix the two agree; on any other
// shape with a partial edge tile, some output elements are skipped (left as NaN) and
// others would be written outside the matrix.

#define TILE 32
#define BLOCK_ROWS 8
#define PER_THREAD (TILE / BLOCK_ROWS)

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    const int c = col0 + tx;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int r = row0 + ty + k * BLOCK_ROWS;
        if (r < rows && c < cols) tile[ty + k * BLOCK_ROWS][tx] = inp[(size_t)r * cols + c];
    }
    __syncthreads();

    const int oc = row0 + tx;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int orow = col0 + ty + k * BLOCK_ROWS;
        if (orow < rows && oc < cols) out[(size_t)orow * rows + oc] = tile[tx][ty + k * BLOCK_ROWS];
    }
}
