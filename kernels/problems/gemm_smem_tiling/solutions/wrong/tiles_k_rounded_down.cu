// WRONG: the loop runs K / TILE times, rounded down, so the partial last tile along K
// is never added (and K < 32 gives all zeros). Right only when K is a multiple of 32.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

#define TILE 32

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
    float acc = 0.0f;
    for (int step = 0; step < K / TILE; ++step) {
        const int k0 = step * TILE;
        As[ty][tx] = row < M ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = col < N ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
