// WRONG: the number of K-slices is K / BK, rounded down. The partial last slice (the
// last K % 16 terms of every dot product) is never computed, and with K < 16 the loop
// does not run at all and C comes out zero. Right only when K is a multiple of 16.
// kplay: grid=(ceil_div(N,128),ceil_div(M,64)) block=128 smem=0

#ifndef BM
#define BM 64  // block tile rows
#endif
#ifndef BN
#define BN 128  // block tile columns
#endif
#ifndef BK
#define BK 16  // depth of one K-slice
#endif
#ifndef WARPS_M
#define WARPS_M 2  // warps stacked along M
#endif
#ifndef LANES_N
#define LANES_N 8  // lanes side by side along N inside a warp (LANES_M = 32 / LANES_N)
#endif
#ifndef MIN_BLOCKS
#define MIN_BLOCKS 3  // blocks per SM the register budget must allow
#endif
#ifndef B_ASYNC
#define B_ASYNC 1  // 1: slices of B go straight to shared memory (cp.async), not via registers
#endif
#define APAD 4

#define NTHREADS 128
#define NWARPS (NTHREADS / 32)
#define WARPS_N (NWARPS / WARPS_M)
#define WM (BM / WARPS_M)  // warp tile rows
#define WN (BN / WARPS_N)  // warp tile columns
#define LANES_M (32 / LANES_N)
#define WM_ITER (WM / (LANES_M * 4))  // 4x4 sub-tiles per lane along M
#define WN_ITER (WN / (LANES_N * 4))  // and along N
#define TM (WM_ITER * 4)
#define TN (WN_ITER * 4)
#define A_LOADS ((BM * BK) / (4 * NTHREADS))  // float4 of A per thread per slice
#define B_LOADS ((BK * BN) / (4 * NTHREADS))
#define A_ROW_STEP (NTHREADS / (BK / 4))  // rows of A between a thread's float4 loads
#define B_ROW_STEP (NTHREADS / (BN / 4))  // rows of B between them

static_assert(WM_ITER >= 1 && WN_ITER >= 1, "warp tile smaller than one sub-tile per lane");
static_assert(WM_ITER * LANES_M * 4 == WM && WN_ITER * LANES_N * 4 == WN, "uneven warp tile");
static_assert(A_LOADS >= 1 && B_LOADS >= 1, "tile too small for one float4 per thread");
static_assert(A_LOADS * 4 * NTHREADS == BM * BK && B_LOADS * 4 * NTHREADS == BK * BN, "uneven");
static_assert(NTHREADS % (BK / 4) == 0 && NTHREADS % (BN / 4) == 0, "load rows");

// The next slice, held in registers between its global loads and its shared stores.
// With B_ASYNC, B's part travels by cp.async instead and needs no registers.
struct Slice {
    float4 a[A_LOADS];
#if !B_ASYNC
    float4 b[B_LOADS];
#endif
};

__device__ __forceinline__ void cp_async16(float* smem, const float* gmem) {
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;\n"); }

__device__ __forceinline__ float4 load4_guarded(const float* __restrict__ p, int valid,
                                                bool vec) {
    // vec: 16-byte aligned and either all four elements exist or none does.
    if (vec) return valid > 0 ? __ldg(reinterpret_cast<const float4*>(p))
                              : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (valid > 0) v.x = __ldg(p);
    if (valid > 1) v.y = __ldg(p + 1);
    if (valid > 2) v.z = __ldg(p + 2);
    if (valid > 3) v.w = __ldg(p + 3);
    return v;
}

// Bs is the shared buffer this slice of B goes to; used only with B_ASYNC, where the
// checked path stores B at once (it runs on edge blocks only, so the wait is rare).
__device__ __forceinline__ void load_slice(Slice& s, float (*Bs)[BN], const float* __restrict__ A,
                                           const float* __restrict__ B, int M, int N, int K,
                                           int bm, int bn, int k0, bool vec) {
    const int t = threadIdx.x;
#pragma unroll
    for (int p = 0; p < A_LOADS; ++p) {
        const int idx = t + p * NTHREADS;
        const int row = bm + idx / (BK / 4), k = k0 + (idx % (BK / 4)) * 4;
        const int valid = row < M ? min(4, K - k) : 0;
        s.a[p] = load4_guarded(A + (size_t)row * K + k, valid, vec);
    }
#pragma unroll
    for (int p = 0; p < B_LOADS; ++p) {
        const int idx = t + p * NTHREADS;
        const int k = k0 + idx / (BN / 4), col = bn + (idx % (BN / 4)) * 4;
        const int valid = k < K ? min(4, N - col) : 0;
#if B_ASYNC
        *reinterpret_cast<float4*>(&Bs[idx / (BN / 4)][(idx % (BN / 4)) * 4]) =
            load4_guarded(B + (size_t)k * N + col, valid, vec);
#else
        s.b[p] = load4_guarded(B + (size_t)k * N + col, valid, vec);
#endif
    }
}

// The fast path, for a slice wholly inside A and B with 16-byte aligned rows: no
// checks. `a` and `b` are the offsets of this thread's first float4 of slice 0 in A and
// B, worked out once before the main loop (32-bit: a register each instead of two for
// a pointer; the caller takes this path only when A and B have under 2^31 elements).
// Slice k0 starts k0 floats to the right in A and k0 rows down in B.
__device__ __forceinline__ void load_slice_fast(Slice& s, float (*Bs)[BN],
                                                const float* __restrict__ A,
                                                const float* __restrict__ B, unsigned a,
                                                unsigned b, int N, int K, int k0) {
#pragma unroll
    for (int p = 0; p < A_LOADS; ++p)
        s.a[p] = __ldg(reinterpret_cast<const float4*>(A + (a + p * A_ROW_STEP * K + k0)));
#pragma unroll
    for (int p = 0; p < B_LOADS; ++p) {
        const float* src = B + (b + (p * B_ROW_STEP + k0) * N);
#if B_ASYNC
        const int idx = threadIdx.x + p * NTHREADS;
        cp_async16(&Bs[idx / (BN / 4)][(idx % (BN / 4)) * 4], src);
#else
        s.b[p] = __ldg(reinterpret_cast<const float4*>(src));
#endif
    }
}

__device__ __forceinline__ void store_slice(const Slice& s, float (*As)[BM + APAD],
                                            float (*Bs)[BN]) {
    const int t = threadIdx.x;
#pragma unroll
    for (int p = 0; p < A_LOADS; ++p) {
        const int idx = t + p * NTHREADS;
        const int m = idx / (BK / 4), k = (idx % (BK / 4)) * 4;
        As[k + 0][m] = s.a[p].x;
        As[k + 1][m] = s.a[p].y;
        As[k + 2][m] = s.a[p].z;
        As[k + 3][m] = s.a[p].w;
    }
#if !B_ASYNC
#pragma unroll
    for (int p = 0; p < B_LOADS; ++p) {
        const int idx = t + p * NTHREADS;
        const int k = idx / (BN / 4), n = (idx % (BN / 4)) * 4;
        *reinterpret_cast<float4*>(&Bs[k][n]) = s.b[p];
    }
#else
    (void)Bs;
    cp_async_wait_all();  // this thread's copies of B have landed; the barrier follows
#endif
}

__device__ __forceinline__ void load_frags(float* a, float* b, const float (*As)[BM + APAD],
                                           const float (*Bs)[BN], int k, int am, int bn) {
#pragma unroll
    for (int i = 0; i < WM_ITER; ++i) {
        const float4 v = *reinterpret_cast<const float4*>(&As[k][am + i * LANES_M * 4]);
        a[i * 4 + 0] = v.x;
        a[i * 4 + 1] = v.y;
        a[i * 4 + 2] = v.z;
        a[i * 4 + 3] = v.w;
    }
#pragma unroll
    for (int j = 0; j < WN_ITER; ++j) {
        const float4 v = *reinterpret_cast<const float4*>(&Bs[k][bn + j * LANES_N * 4]);
        b[j * 4 + 0] = v.x;
        b[j * 4 + 1] = v.y;
        b[j * 4 + 2] = v.z;
        b[j * 4 + 3] = v.w;
    }
}

extern "C" __global__ void __launch_bounds__(NTHREADS, MIN_BLOCKS)
sgemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
      int M, int N, int K) {
    __shared__ __align__(16) float As[2][BK][BM + APAD];
    __shared__ __align__(16) float Bs[2][BK][BN];

    const int bm = blockIdx.y * BM;
    const int bn = blockIdx.x * BN;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = (warp / WARPS_N) * WM, wn = (warp % WARPS_N) * WN;
    const int lm = lane / LANES_N, ln = lane % LANES_N;
    // First row (in As) and column (in Bs) of this lane's sub-tiles.
    const int am = wm + lm * 4, bnn = wn + ln * 4;
    const bool vec = (K % 4 == 0) && (N % 4 == 0);
    const int slices = K / BK;
    // Blocks wholly inside C, with aligned rows, load every slice that ends inside K
    // without checks: that is all blocks and slices but the edges.
    const bool interior = vec && bm + BM <= M && bn + BN <= N &&
                          (long long)M * K < (1ll << 31) && (long long)K * N < (1ll << 31);
    const int t = threadIdx.x;
    const unsigned a_off = (bm + t / (BK / 4)) * K + (t % (BK / 4)) * 4;
    const unsigned b_off = (t / (BN / 4)) * N + bn + (t % (BN / 4)) * 4;
    // Loads slice k0: A into registers, B too, or with B_ASYNC straight into Bs.
    auto load = [&](Slice& sl, float (*Bs)[BN], int k0) {
        if (interior && k0 + BK <= K)
            load_slice_fast(sl, Bs, A, B, a_off, b_off, N, K, k0);
        else
            load_slice(sl, Bs, A, B, M, N, K, bm, bn, k0, vec);
    };

    float acc[TM][TN];
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
    float fa[2][TM], fb[2][TN];
    Slice next;

    load(next, Bs[0], 0);
    store_slice(next, As[0], Bs[0]);
    __syncthreads();
    load_frags(fa[0], fb[0], As[0], Bs[0], 0, am, bnn);

    for (int s = 0; s < slices; ++s) {
        const int cur = s & 1;
        const bool more = s + 1 < slices;
        // Issue the next slice's loads now; they are first needed after this slice's
        // FMAs, which cover their latency. B's copies go into the other buffer at once:
        // every warp finished reading it before the barrier that ended the last slice.
        if (more) load(next, Bs[cur ^ 1], (s + 1) * BK);
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            if (k < BK - 1) {
                load_frags(fa[(k + 1) & 1], fb[(k + 1) & 1], As[cur], Bs[cur], k + 1, am, bnn);
            } else if (more) {
                // Everyone finished reading the other buffer one slice ago (the barrier
                // below, last time round, guarantees it), so it may be overwritten.
                store_slice(next, As[cur ^ 1], Bs[cur ^ 1]);
                __syncthreads();
                load_frags(fa[(k + 1) & 1], fb[(k + 1) & 1], As[cur ^ 1], Bs[cur ^ 1], 0, am,
                           bnn);
            }
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j)
                    acc[i][j] = fmaf(fa[k & 1][i], fb[k & 1][j], acc[i][j]);
        }
    }

#pragma unroll
    for (int i = 0; i < WM_ITER; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = bm + am + i * LANES_M * 4 + r;
            if (row >= M) continue;
            float* c = C + (size_t)row * N;
#pragma unroll
            for (int j = 0; j < WN_ITER; ++j) {
                const int col = bn + bnn + j * LANES_N * 4;
                const float* v = &acc[i * 4 + r][j * 4];
                if (vec && col < N) {
                    *reinterpret_cast<float4*>(c + col) = make_float4(v[0], v[1], v[2], v[3]);
                } else {
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        if (col + q < N) c[col + q] = v[q];
                }
            }
        }
}
