// WRONG: in the rush to make every access walk along memory, A is indexed as if it were
// stored column-major, A[k * M + row]. Every address stays inside A, so nothing
// crashes, but the products use the wrong elements. Right only when M = 1 or K = 1,
// where the two layouts coincide.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) acc = fmaf(A[(size_t)k * M + row], B[(size_t)k * N + col], acc);
    C[(size_t)row * N + col] = acc;
}
