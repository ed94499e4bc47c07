// Ladder step 4: 1-D blocktiling, several outputs per thread.
//
// Step 3 does one FMA per two shared-memory loads, so shared memory, not arithmetic,
// sets its speed. Here each thread computes TM = 8 outputs of one column of C: for
// each k it loads one value of B into a register and reuses it for 8 FMAs, against
// 8 values of A that the whole warp reads at one address (a broadcast, so cheap).
// That is 8 FMAs for 9 loads instead of 1 for 2, and the block tile grows to 64x64,
// which halves the global traffic per FMA again compared with 32x32 tiles.
// kplay: grid=(ceil_div(N,64),ceil_div(M,64)) block=512 smem=0

#define BM 64
#define BN 64
#define BK 8
#define TM 8
#define NTHREADS ((BM * BN) / TM)  // 512: one thread per 8 outputs

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
      int M, int N, int K) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int t = threadIdx.x;
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;

    // Loading: BM*BK = BK*BN = 512 elements per tile, one of each per thread.
    const int a_row = t / BK, a_col = t % BK;
    const int b_row = t / BN, b_col = t % BN;
    // Computing: a warp's 32 threads take 32 neighbouring columns of one row group,
    // so B reads are conflict-free and A reads are broadcasts.
    const int tc = t % BN;
    const int tr = t / BN;  // rows tr*TM .. tr*TM + TM - 1 of the tile

    float acc[TM];
#pragma unroll
    for (int i = 0; i < TM; ++i) acc[i] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        const int ga = bm + a_row, ka = k0 + a_col;
        As[a_row][a_col] = (ga < M && ka < K) ? A[(size_t)ga * K + ka] : 0.0f;
        const int kb = k0 + b_row, gb = bn + b_col;
        Bs[b_row][b_col] = (kb < K && gb < N) ? B[(size_t)kb * N + gb] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k][tc];  // one register, reused TM times
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] = fmaf(As[tr * TM + i][k], b, acc[i]);
        }
        __syncthreads();
    }

    const int col = bn + tc;
    if (col >= N) return;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + tr * TM + i;
        if (row < M) C[(size_t)row * N + col] = acc[i];
    }
}
