// WRONG: the tile goes to its mirrored place in the output, but the store phase reads
// tile[ty + 8k][tx], the way it was loaded, instead of tile[tx][ty + 8k]. Each 32x32 tile
// lands in the right spot without being transposed itself, so only the elements on the
// tiles' diagonals (and a 1x1 matrix) come out right.

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
        tile[ty + k * BLOCK_ROWS][tx] = (r < rows && c < cols) ? inp[(size_t)r * cols + c] : 0.0f;
    }
    __syncthreads();

    const int oc = row0 + tx;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int orow = col0 + ty + k * BLOCK_ROWS;
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[ty + k * BLOCK_ROWS][tx];
    }
}
