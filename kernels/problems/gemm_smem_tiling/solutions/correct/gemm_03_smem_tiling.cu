// Ladder step 3: shared-memory tiling.
//
// A 32x32 block owns a 32x32 tile of C and walks along K in steps of 32. At each step
// the block copies one 32x32 tile of A and one of B into shared memory (each thread
// copies one element of each, coalesced), waits, and then every thread reads a row of
// the A tile and a column of the B tile from shared memory. Each element fetched from
// global memory is now used 32 times instead of once.
//
// Tiles that hang over the edge of a matrix are filled with zeros, so the inner loop
// is the same for every tile and any M, N, K works: a zero adds nothing to the sum.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

#define TILE 32

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x;  // column inside the tile
    const int ty = threadIdx.y;  // row inside the tile
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // Neighbouring threads (tx) load neighbouring addresses in both tiles.
        const int ka = k0 + tx;
        const int kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        // Nobody may read a tile before every thread has written its element...
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) {
            // As[ty][k] is one address for the whole warp (a broadcast); Bs[k][tx]
            // is 32 consecutive words, one per bank: no conflicts either way.
            acc = fmaf(As[ty][k], Bs[k][tx], acc);
        }
        // ...and nobody may overwrite it before every thread has finished reading.
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
