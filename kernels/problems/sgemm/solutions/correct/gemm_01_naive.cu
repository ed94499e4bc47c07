// Ladder step 1: one thread per element of C, the first kernel anyone writes.
//
// Thread (x, y) of block (bx, by) computes C[row][col] with row taken from the x
// coordinate. That choice looks harmless and is the whole problem: the 32 threads of
// a warp differ in x, so they walk 32 different rows of A at once (addresses K floats
// apart) and write 32 different rows of C. Every warp-wide load of A touches 32 cache
// lines to use 4 bytes of each. Step 2 swaps one pair of indices and nothing else.
// kplay: grid=(ceil_div(M,32),ceil_div(N,32)) block=(32,32) smem=0

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    // The grid is rounded up to whole blocks; the threads past the edge own nothing.
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(A[(size_t)row * K + k], B[(size_t)k * N + col], acc);
    }
    C[(size_t)row * N + col] = acc;
}
