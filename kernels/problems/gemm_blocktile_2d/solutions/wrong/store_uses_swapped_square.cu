// WRONG: the products are right, but the store swaps the thread's two tile coordinates:
// the square computed for rows tr*8.. and columns tc*8.. is written to rows tc*8.. and
// columns tr*8.. . Thread 0 (tr = tc = 0) and the threads on the diagonal land in the
// right place; every other square is written where another thread's belongs (or is
// dropped by the guard). Right only when C fits in the first 8x8 square.
// kplay: grid=(ceil_div(N,128),ceil_div(M,128)) block=256 smem=0

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS ((BM / TM) * (BN / TN))  // 256

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
      int M, int N, int K) {
    __shared__ float As[BM][BK];
    __shared__ float Bs[BK][BN];
    const int t = threadIdx.x;
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;
    const int tr = t / (BN / TN);  // this thread's 8 rows start at tr * TM
    const int tc = t % (BN / TN);  // and its 8 columns at tc * TN

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float a_frag[TM], b_frag[TN];

    for (int k0 = 0; k0 < K; k0 += BK) {
        // 1024 elements of each tile, four per thread, coalesced along rows.
#pragma unroll
        for (int p = 0; p < (BM * BK) / NTHREADS; ++p) {
            const int idx = t + p * NTHREADS;
            const int ar = idx / BK, ac = idx % BK;
            const int ga = bm + ar, ka = k0 + ac;
            As[ar][ac] = (ga < M && ka < K) ? A[(size_t)ga * K + ka] : 0.0f;
            const int br = idx / BN, bc = idx % BN;
            const int kb = k0 + br, gb = bn + bc;
            Bs[br][bc] = (kb < K && gb < N) ? B[(size_t)kb * N + gb] : 0.0f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) a_frag[i] = As[tr * TM + i][k];
#pragma unroll
            for (int j = 0; j < TN; ++j) b_frag[j] = Bs[k][tc * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a_frag[i], b_frag[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + tc * TM + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + tr * TN + j;
            if (col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
