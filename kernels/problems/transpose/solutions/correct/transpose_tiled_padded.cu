// Tiled transpose with a padded tile: TILE + 1 floats per tile row shift each row by one
// bank, so the column reads of the write phase spread over all 32 banks. As in
// transpose_tiled.cu, each thread issues all its loads before storing any.
// Sizes: a 64 x 64 tile moved by 64 x 8 threads, eight elements a thread. Measured on an
// H200 against 32 x 32 tiles with 8 or 4 rows of threads (bench/tune_gpu.py), it took the
// kernel from about 84% to about 94% of the copy bandwidth; likely reasons (not profiled):
// twice the loads in flight per thread, a quarter as many blocks, each moving four times
// the bytes per barrier.
// kplay: grid=(ceil_div(cols,64),ceil_div(rows,64)) block=(64,8)

#ifndef TILE
#define TILE 64  // the tile is TILE x TILE; blockDim.x must equal TILE
#endif
#ifndef BLOCK_ROWS
#define BLOCK_ROWS 8  // blockDim.y of the launch line above
#endif
#define PER_THREAD (TILE / BLOCK_ROWS)

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    const int c = col0 + tx;
    float v[PER_THREAD];
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int r = row0 + ty + k * BLOCK_ROWS;
        v[k] = (r < rows && c < cols) ? inp[(size_t)r * cols + c] : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) tile[ty + k * BLOCK_ROWS][tx] = v[k];
    __syncthreads();

    const int oc = row0 + tx;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int orow = col0 + ty + k * BLOCK_ROWS;
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[tx][ty + k * BLOCK_ROWS];
    }
}
