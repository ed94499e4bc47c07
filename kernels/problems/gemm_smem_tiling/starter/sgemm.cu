// C = A @ B with A (M x K), B (K x N) and C (M x N), all row-major float32.
// Launch: a 32x32 block per 32x32 tile of C; thread (tx, ty) of block (bx, by) owns
// C[by*32 + ty][bx*32 + tx]. The block walks along K one 32-wide step at a time.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

#define TILE 32

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // ---- TODO ------------------------------------------------------------
        // 1. Copy one element of each tile into shared memory:
        //      As[ty][tx] <- A[row][k0 + tx]     (A[r][k] is A[(size_t)r * K + k])
        //      Bs[ty][tx] <- B[k0 + ty][col]     (B[k][c] is B[(size_t)k * N + c])
        //    writing 0.0f for any element that lies outside A or B.
        // 2. Wait until the whole block has written its elements.
        // 3. Add the products of row ty of As and column tx of Bs to acc.
        // 4. Wait again before the next step overwrites the tiles.
        // ---- end of TODO -----------------------------------------------------
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
