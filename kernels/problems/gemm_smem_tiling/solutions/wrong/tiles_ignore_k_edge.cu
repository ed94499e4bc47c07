// WRONG: the tile copies check the row of A and the column of B, but not K. In the last
// step along K, A[row][k0 + tx] with k0 + tx >= K is really the start of row + 1, and
// B[k0 + ty][col] with k0 + ty >= K lies past the last row of B: both tiles pick up
// values that are not zeros, and their products land in C. (Guarding only one of the two
// is not enough to show the bug: a zero in the other tile cancels the stray value, and
// the result is right although the kernel reads outside its row.)
// Right only when K is a multiple of 32.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

#define TILE 32

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        As[ty][tx] = row < M ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
