// One thread per element of C. A warp spans 32 consecutive columns: its reads of B
// and writes of C are coalesced and A[row][k] is a broadcast, but every operand
// comes from global memory (or cache) once per FMA.

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;

    const float* a = A + (size_t)row * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(a[k], B[(size_t)k * N + col], acc);
    }
    C[(size_t)row * N + col] = acc;
}
