// C = A @ B with A (M x K), B (K x N) and C (M x N), all row-major float32.
// Launch: 256 threads per 128x128 tile of C; thread t computes rows tr*8 .. tr*8+7 and
// columns tc*8 .. tc*8+7 of it (tr = t / 16, tc = t % 16), as in step 5. New here: the
// A tile is stored transposed, As[k][m], so that a thread's 8 values of A for one k
// are contiguous. The float4 global loads (with a scalar path for shapes that are not
// multiples of 4) and the store of C are written for you.
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
            a4 = load4_scalar(pa, ga < M ? min(4, K - ka) : 0);
            b4 = load4_scalar(pb, kb < K ? min(4, N - gb) : 0);
        }
        // ---- TODO (1) --------------------------------------------------------
        // Write the four values of a4 (row a_row of the A slice, k = a_col .. a_col+3)
        // into the transposed tile As[k][m].
        // ---- end of TODO (1) -------------------------------------------------
        *reinterpret_cast<float4*>(&Bs[b_row][b_col]) = b4;
        __syncthreads();
        // ---- TODO (2) --------------------------------------------------------
        // For each k in 0 .. BK-1: read this thread's 8 values of A, As[k][tr*TM ..
        // tr*TM+7], and 8 values of B, Bs[k][tc*TN .. tc*TN+7], as four float4, and
        // add their 8x8 outer product to acc. Unroll every loop.
        // ---- end of TODO (2) -------------------------------------------------
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
