// C = A @ B with A (M x K), B (K x N) and C (M x N), all row-major float32.
// The default launch gives each 32x32 block one 32x32 tile of C:
// thread (x, y) of block (bx, by) owns C[by*32 + y][bx*32 + x].

extern "C" __global__ void sgemm(const float* A, const float* B, float* C, int M, int N, int K) {
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= M || col >= N) return;

    float acc = 0.0f;
    // TODO: accumulate the dot product of row `row` of A and column `col` of B.
    //       A[row][k] sits at A[row * K + k]; B[k][col] sits at B[k * N + col].

    C[(size_t)row * N + col] = acc;
}
