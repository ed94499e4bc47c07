// WRONG: the scalar path loads a group of four only when all four exist, and zeros
// otherwise. When K (or N) is not a multiple of 4 the last 1-3 elements of every row
// of A (or B) are replaced by zeros: the last columns of C come out zero and every
// dot product misses its last terms. Right whenever K and N are multiples of 4.
// kplay: grid=(ceil_div(N,128),ceil_div(M,128)) block=256 smem=0

#define BM 128
#define BN 128
#define BK 8
#define TM 8
#define TN 8
#define NTHREADS 256

__device__ __forceinline__ float4 load4(const float* __restrict__ p, bool in) {
    return in ? *reinterpret_cast<const float4*>(p) : make_float4(0.f, 0.f, 0.f, 0.f);
}

__device__ __forceinline__ float4 load4_scalar(const float* __restrict__ p, int valid) {
    // `valid` elements (0..4) exist; the rest of the vector is zero padding.
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (valid > 0) v.x = p[0];
    if (valid > 1) v.y = p[1];
    if (valid > 2) v.z = p[2];
    if (valid > 3) v.w = p[3];
    return v;
}

extern "C" __global__ void __launch_bounds__(NTHREADS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
      int M, int N, int K) {
    __shared__ __align__(16) float As[BK][BM];  // transposed: As[k][m]
    __shared__ __align__(16) float Bs[BK][BN];
    const int t = threadIdx.x;
    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;
    const bool vec = (K % 4 == 0) && (N % 4 == 0);

    // Loading map: a row of the A tile is 8 floats = two float4, a row of the B tile
    // 128 floats = 32 float4. One float4 of each per thread.
    const int a_row = t / 2, a_col = (t % 2) * 4;
    const int b_row = t / 32, b_col = (t % 32) * 4;
    // Computing map: 16x16 threads, each with 8 consecutive rows and 8 columns.
    const int tr = t / 16, tc = t % 16;

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

    for (int k0 = 0; k0 < K; k0 += BK) {
        const int ga = bm + a_row, ka = k0 + a_col;
        const int kb = k0 + b_row, gb = bn + b_col;
        const float* pa = A + (size_t)ga * K + ka;
        const float* pb = B + (size_t)kb * N + gb;
        float4 a4, b4;
        if (vec) {
            // With K % 4 == 0, ka < K means all four of ka..ka+3 are inside; same for N.
            a4 = load4(pa, ga < M && ka < K);
            b4 = load4(pb, kb < K && gb < N);
        } else {
            a4 = load4_scalar(pa, (ga < M && K - ka >= 4) ? 4 : 0);
            b4 = load4_scalar(pb, (kb < K && N - gb >= 4) ? 4 : 0);
        }
        As[a_col + 0][a_row] = a4.x;
        As[a_col + 1][a_row] = a4.y;
        As[a_col + 2][a_row] = a4.z;
        As[a_col + 3][a_row] = a4.w;
        *reinterpret_cast<float4*>(&Bs[b_row][b_col]) = b4;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(&As[k][tr * TM]);
            const float4 a1 = *reinterpret_cast<const float4*>(&As[k][tr * TM + 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tc * TN]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][tc * TN + 4]);
            const float a[TM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[TN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        __syncthreads();
    }

    const int col0 = bn + tc * TN;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + tr * TM + i;
        if (row >= M) break;
        float* c = C + (size_t)row * N;
#pragma unroll
        for (int j = 0; j < TN; j += 4) {
            const int col = col0 + j;
            if (vec && col < N) {
                *reinterpret_cast<float4*>(c + col) =
                    make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (col + q < N) c[col + q] = acc[i][j + q];
            }
        }
    }
}
