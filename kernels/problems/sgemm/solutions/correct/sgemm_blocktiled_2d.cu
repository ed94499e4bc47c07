// 2-D block tiling: 256 threads compute a 128x128 tile of C, each thread an 8x8
// block held in registers, so every value read from shared memory feeds 8 FMAs.
// A thread's rows and columns come in two groups of four, 64 apart, which lets the
// warp read shared memory with conflict-free 16-byte loads. The A tile is stored
// transposed (k-major) and padded so that the transposing stores do not conflict.
// kplay: grid=(ceil_div(N,128),ceil_div(M,128)) block=256

#define BM 128
#define BN 128
#define BK 8
#define NTHREADS 256
#define APAD 4

__device__ __forceinline__ void load_tiles(const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float (*As)[BM + APAD], float (*Bs)[BN],
                                           int M, int N, int K, int bm, int bn, int k0) {
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < (BM * BK) / NTHREADS; ++i) {
        const int idx = t + i * NTHREADS;
        const int ar = idx / BK, ac = idx % BK;  // A tile is BM x BK
        const int gr = bm + ar, gk = k0 + ac;
        As[ac][ar] = (gr < M && gk < K) ? A[(size_t)gr * K + gk] : 0.0f;
        const int br = idx / BN, bc = idx % BN;  // B tile is BK x BN
        const int gkb = k0 + br, gc = bn + bc;
        Bs[br][bc] = (gkb < K && gc < N) ? B[(size_t)gkb * N + gc] : 0.0f;
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
      int M, int N, int K) {
    __shared__ __align__(16) float As[BK][BM + APAD];
    __shared__ __align__(16) float Bs[BK][BN];
    const int tx = threadIdx.x % 16;
    const int ty = threadIdx.x / 16;
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        load_tiles(A, B, As, Bs, M, N, K, bm, bn, k0);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[k][64 + ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][64 + tx * 4]);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int col = bn + (j < 4 ? tx * 4 + j : 64 + tx * 4 + (j - 4));
            if (col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}
