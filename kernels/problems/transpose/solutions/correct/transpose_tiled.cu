// Shared-memory tiled transpose: a 32x8 block reads a 32x32 tile with coalesced
// row reads, then writes the mirrored tile with coalesced row writes. Each thread
// issues its four loads before storing any of them, so they are in flight together.
// Reading the tile by column makes all 32 threads of a warp hit the same bank
// (32-way conflicts); transpose_tiled_padded.cu removes them.

#define TILE 32
#define BLOCK_ROWS 8  // blockDim.y of the default launch
#define PER_THREAD (TILE / BLOCK_ROWS)

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE];
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

    // In the output the block covers rows col0.. and columns row0..
    const int oc = row0 + tx;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int orow = col0 + ty + k * BLOCK_ROWS;
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[tx][ty + k * BLOCK_ROWS];
    }
}
