// Ladder step 5: 2-D blocktiling, an 8x8 block of C per thread.
//
// With a column of 8 outputs per thread (step 4) each B value feeds 8 FMAs but each A
// value feeds only one. Give each thread an 8x8 square instead: per k it loads 8
// values of A and 8 of B into registers and does all 64 products of the two, so 16
// shared-memory loads feed 64 FMAs. The block tile grows to 128x128, served by 256
// threads; each global element brought into shared memory is now reused 128 times.
// The 64 accumulators live in registers: that is why the loops below are fully
// unrolled (a register array indexed by a run-time value would spill to memory).
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
        const int row = bm + tr * TM + i;
        if (row >= M) break;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + tc * TN + j;
            if (col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
