// Ladder step 2: the same arithmetic, with the thread-to-element map turned around.
//
// Now the x coordinate picks the column. The 32 threads of a warp share one row:
// their reads of A[row][k] are one address (the hardware broadcasts it), their reads
// of B[k][col..col+31] are 128 contiguous bytes (one transaction), and their writes
// of C are contiguous too. The kernel still fetches two operands per FMA from the
// memory system; only the waste in each fetch is gone.
// kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,32) smem=0

extern "C" __global__ void sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                 float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;

    const float* a_row = A + (size_t)row * K;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc = fmaf(a_row[k], B[(size_t)k * N + col], acc);
    }
    C[(size_t)row * N + col] = acc;
}
