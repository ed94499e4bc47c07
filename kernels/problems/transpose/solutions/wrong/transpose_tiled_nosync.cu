// WRONG: there is no __syncthreads() between filling the shared tile and reading it
// back, so a warp may read tile entries that another warp has not written yet. It
// usually fails on a GPU, but not on every run: a race.
// kplay-expect: wrong-on-gpu-only

#define TILE 32

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    const int tx = threadIdx.x;
    const int row0 = blockIdx.y * TILE;
    const int col0 = blockIdx.x * TILE;

    const int c = col0 + tx;
    for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
        const int r = row0 + i;
        if (r < rows && c < cols) tile[i][tx] = inp[(size_t)r * cols + c];
    }

    const int oc = row0 + tx;
    for (int i = threadIdx.y; i < TILE; i += blockDim.y) {
        const int orow = col0 + i;
        if (orow < cols && oc < rows) out[(size_t)orow * rows + oc] = tile[tx][i];
    }
}
