// Shared-memory tiled transpose: a block reads a 32x32 tile with coalesced row
// reads, then writes the mirrored tile with coalesced row writes. Reading the tile
// by column makes every thread of a warp hit the same bank (32-way conflicts);
// transpose_tiled_padded.cu removes them.

#define TILE 32

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE];
    const int tx = threadIdx.x;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    const int c = col0 + tx;
    for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
        const int r = row0 + i;
        if (r < rows && c < cols) tile[i][tx] = inp[(size_t)r * cols + c];
    }
    __syncthreads();

    // In the output the block covers rows col0.. and columns row0..
    const int oc = row0 + tx;
    for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
        const int orow = col0 + i;
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[tx][i];
    }
}
