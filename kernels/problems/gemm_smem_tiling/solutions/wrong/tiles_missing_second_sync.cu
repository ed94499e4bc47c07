// WRONG: no barrier after the inner loop. A fast warp starts copying the next step's
// tiles while slower warps are still reading this step's, so some products use
// values from the wrong step. Invisible when K fits in one tile; a race otherwise.
// kplay-expect: wrong-on-gpu-only
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
        As[ty][tx] = (row < M && k0 + tx < K) ? A[(size_t)row * K + k0 + tx] : 0.0f;
        Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(size_t)(k0 + ty) * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
