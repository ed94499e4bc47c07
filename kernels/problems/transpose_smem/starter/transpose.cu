// out[c][r] = inp[r][c] for a rows x cols input; both matrices row-major.
// Launch: a 32x8 block per 32x32 tile of the input, ceil_div(cols, 32) x ceil_div(rows, 32)
// blocks. Thread (tx, ty) moves column tx of its tile in rows ty, ty+8, ty+16 and ty+24.

#define TILE 32
#define BLOCK_ROWS 8  // blockDim.y of the default launch

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row0 = blockIdx.y * TILE;  // the tile's first row in the input
    const int col0 = blockIdx.x * TILE;  // the tile's first column in the input

    // ---- TODO ---------------------------------------------------------------------
    // 1. Declare the tile in shared memory, padded against bank conflicts.
    // 2. Load: for k = 0..3, input element (row0 + ty + 8k, col0 + tx), if it lies
    //    inside the input, into tile[ty + 8k][tx].
    // 3. Wait until the whole block has written the tile.
    // 4. Store: for k = 0..3, tile[tx][ty + 8k] into output element
    //    (col0 + ty + 8k, row0 + tx), if it lies inside the output (cols x rows).
    // ---- end of TODO ----------------------------------------------------------------
    (void)inp;
    (void)out;
    (void)rows;
    (void)cols;
    (void)tx;
    (void)ty;
    (void)row0;
    (void)col0;
}
