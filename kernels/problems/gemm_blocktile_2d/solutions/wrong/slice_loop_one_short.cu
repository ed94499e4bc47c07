// WRONG: the loop over the slice runs k < BK - 1, so column 7 of every A slice (and
// row 7 of every B slice) never enters a product: of every 8 terms of the dot product
// one is lost. Right only when K < 8, where that column is padding anyway.
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
        for (int k = 0; k < BK - 1; ++k) {
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
        const int row = bm + tr * TM + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + tc * TN + j;
            if (col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
