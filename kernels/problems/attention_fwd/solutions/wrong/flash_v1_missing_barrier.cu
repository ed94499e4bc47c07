// kplay: grid=(ceil_div(seq,64),batch*heads) block=128 smem=640*(dim+8)
// WRONG ON PURPOSE: flash_v1_mma.cu with one __syncthreads() removed: the one between
// waiting for a key/value tile's copies and reading the tile. Each thread's
// cp.async.wait_group covers only the copies that thread issued, and every warp reads rows
// that other warps copied, so a warp can multiply rows of K and V that have not arrived:
// stale data from the tile before, or (on the first tile) whatever shared memory held. A
// race: it needs a GPU to show, and shows as wrong elements or as two launches of the same
// case that disagree.
//
// Everything else is the correct kernel; its comments explain the design.

#include <cuda_bf16.h>

#define WARPS 4
#define BLOCK_M (16 * WARPS)
#define BLOCK_N 64
#define THREADS (32 * WARPS)

typedef __nv_bfloat16 bf16;
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ unsigned smem_u32(const void* p)
{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared, bypassing L1; with valid false nothing is read and the 16
// bytes are zero-filled (rows past the end of the sequence).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid)
{
    const int bytes = valid ? 16 : 0;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)),
                 "l"(src), "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit()
{
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <int N>
__device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i
// receives it. Without .trans lane t holds row t/4, columns 2(t%4), 2(t%4)+1.
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], const bf16* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

// With .trans lane t holds rows 2(t%4), 2(t%4)+1 of column t/4.
__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], const bf16* p)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}

// c (16x8, fp32) += a (16x16, bf16, row) * b (16x8, bf16, col).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const unsigned (&a)[4], unsigned b0,
                                         unsigned b1)
{
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
        "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats to a bf16 pair; the first (lower column) goes to the low half.
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi)
{
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

__device__ __forceinline__ float exp2_approx(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// ROWS rows of D elements starting at row0 into a padded shared tile; rows >= seq are zeros.
template <int D, int ROWS>
__device__ __forceinline__ void load_tile(bf16* dst, const bf16* src, int row0, int seq)
{
    constexpr int CHUNKS = D / 8;  // 16-byte pieces per row
    static_assert(ROWS * CHUNKS % THREADS == 0, "whole passes of the block");
#pragma unroll
    for (int i = 0; i < ROWS * CHUNKS / THREADS; ++i) {
        const int c = i * THREADS + threadIdx.x;
        const int r = c / CHUNKS, piece = c % CHUNKS;
        const bool ok = row0 + r < seq;
        const bf16* from = src + (size_t)(ok ? row0 + r : 0) * D + piece * 8;
        cp_async16(dst + r * (D + 8) + piece * 8, from, ok);
    }
}

template <int D>
__device__ __forceinline__ void attention_tile(const bf16* __restrict__ q,
                                               const bf16* __restrict__ k,
                                               const bf16* __restrict__ v, bf16* __restrict__ o,
                                               float* __restrict__ lse, float scale, int seq,
                                               bool causal, bf16* smem)
{
    constexpr int SROW = D + 8;         // padded row, elements
    constexpr int KSTEPS = D / 16;      // k-steps of Q K^T
    constexpr int NT = BLOCK_N / 8;     // 8-key column tiles of S
    constexpr int DT = D / 8;           // 8-wide column tiles of O
    constexpr float LOG2E = 1.4426950408889634f;
    constexpr float LN2 = 0.6931471805599453f;

    bf16* sQ = smem;                          // BLOCK_M x SROW (later: the output staging)
    bf16* sK = sQ + BLOCK_M * SROW;           // 2 x BLOCK_N x SROW
    bf16* sV = sK + 2 * BLOCK_N * SROW;       // 2 x BLOCK_N x SROW

    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int g = lane / 4, tq = lane % 4;    // groupID, threadID_in_group
    const int m0 = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;
    const size_t head = blockIdx.y;
    const bf16* qh = q + head * seq * D;
    const bf16* kh = k + head * seq * D;
    const bf16* vh = v + head * seq * D;

    const int kv_end = causal ? min(seq, m0 + BLOCK_M) : seq;
    const int n_tiles = (kv_end + BLOCK_N - 1) / BLOCK_N;
    const float sl2 = scale * LOG2E;          // scores are kept in log2 units
    const int wrow = m0 + warp * 16;          // first query row of this warp
    const int row_a = wrow + g, row_b = wrow + g + 8;

    load_tile<D, BLOCK_M>(sQ, qh, m0, seq);
    load_tile<D, BLOCK_N>(sK, kh, 0, seq);
    load_tile<D, BLOCK_N>(sV, vh, 0, seq);
    cp_async_commit();

    unsigned qf[KSTEPS][4];
    float acc[DT][4];
#pragma unroll
    for (int i = 0; i < DT; ++i) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.0f;
    float m_run[2] = {NEG_INF, NEG_INF};  // rows g and g+8, log2 units
    float l_run[2] = {0.0f, 0.0f};            // this thread's part of the row sums

    for (int t = 0; t < n_tiles; ++t) {
        const int buf = t & 1;
        if (t + 1 < n_tiles) {
            const int next = (t + 1) * BLOCK_N;
            load_tile<D, BLOCK_N>(sK + (buf ^ 1) * BLOCK_N * SROW, kh, next, seq);
            load_tile<D, BLOCK_N>(sV + (buf ^ 1) * BLOCK_N * SROW, vh, next, seq);
        }
        cp_async_commit();
        cp_async_wait<1>();  // all but the newest group: tile t (and Q) have landed
        // (The barrier that belongs here is missing. cp.async.wait_group waits for this
        // thread's own copies only; the rows of K and V that other threads copied may not
        // have landed when this warp's ldmatrix reads them.)

        if (t == 0) {
            // A fragment of rows 0-15, k 0-15: matrices (rows 0-7, k 0-7), (rows 8-15,
            // k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = registers a0a1..a6a7.
#pragma unroll
            for (int ks = 0; ks < KSTEPS; ++ks) {
                const int r = warp * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
                ldmatrix_x4(qf[ks], sQ + r * SROW + ks * 16 + (lane >> 4) * 8);
            }
        }

        // S = Q K^T. K is stored [key][d], which is B (k = d, n = key) in column-major
        // order, so ldmatrix without .trans yields B fragments. Matrices: (keys 0-7,
        // d 0-7), (keys 0-7, d 8-15) = b0b1, b2b3 of key tile 2np; then keys 8-15.
        const bf16* kb = sK + buf * BLOCK_N * SROW;
        float s[NT][4];
#pragma unroll
        for (int i = 0; i < NT; ++i) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                unsigned b[4];
                const int key = np * 16 + (lane >> 4) * 8 + (lane & 7);
                ldmatrix_x4(b, kb + key * SROW + ks * 16 + ((lane >> 3) & 1) * 8);
                mma_bf16(s[2 * np], qf[ks], b[0], b[1]);
                mma_bf16(s[2 * np + 1], qf[ks], b[2], b[3]);
            }
        }

        // Scale into log2 units, then mask: C fragment element e of tile nt is row
        // g (+8 for e >= 2), key n0 + 8 nt + 2 tq + (e & 1).
        const int n0 = t * BLOCK_N;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) s[nt][e] *= sl2;
        if (n0 + BLOCK_N > seq || (causal && n0 + BLOCK_N - 1 > wrow)) {
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    const int col = n0 + nt * 8 + tq * 2 + (e & 1);
                    const int row = e < 2 ? row_a : row_b;
                    if (col >= seq || (causal && col > row)) s[nt][e] = NEG_INF;
                }
        }

        // Online softmax. A row lives in the 4 lanes of a quad: reduce with xor 1, 2.
        float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
            mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
        }
        float alpha[2], base[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            base[r] = mx[r] == NEG_INF ? 0.0f : mx[r];  // a row with nothing seen yet
            alpha[r] = exp2_approx(m_run[r] - base[r]);    // 0 on the first tile
            m_run[r] = mx[r];
            l_run[r] *= alpha[r];
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            s[nt][0] = exp2_approx(s[nt][0] - base[0]);
            s[nt][1] = exp2_approx(s[nt][1] - base[0]);
            s[nt][2] = exp2_approx(s[nt][2] - base[1]);
            s[nt][3] = exp2_approx(s[nt][3] - base[1]);
            l_run[0] += s[nt][0] + s[nt][1];
            l_run[1] += s[nt][2] + s[nt][3];
        }
#pragma unroll
        for (int i = 0; i < DT; ++i) {
            acc[i][0] *= alpha[0];
            acc[i][1] *= alpha[0];
            acc[i][2] *= alpha[1];
            acc[i][3] *= alpha[1];
        }

        // O += P V. The A fragment of keys 16kk..16kk+15 is the C fragments of key tiles
        // 2kk (a0a1: row g, a2a3: row g+8) and 2kk+1 (a4a5, a6a7). V is [key][d] = B
        // (k = key, n = d) row-major, so it is read with .trans. Matrices: (keys 0-7,
        // d 0-7), (keys 8-15, d 0-7) = b0b1, b2b3 of d tile 2dp; then d 8-15.
        const bf16* vb = sV + buf * BLOCK_N * SROW;
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            unsigned a[4];
            a[0] = pack_bf16(s[2 * kk][0], s[2 * kk][1]);
            a[1] = pack_bf16(s[2 * kk][2], s[2 * kk][3]);
            a[2] = pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]);
            a[3] = pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3]);
#pragma unroll
            for (int dp = 0; dp < DT / 2; ++dp) {
                unsigned b[4];
                const int key = kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
                ldmatrix_x4_trans(b, vb + key * SROW + dp * 16 + (lane >> 4) * 8);
                mma_bf16(acc[2 * dp], a, b[0], b[1]);
                mma_bf16(acc[2 * dp + 1], a, b[2], b[3]);
            }
        }
        // Every warp must be done with buffer `buf` before the next iteration's copies
        // (tile t + 2) are issued into it.
        __syncthreads();
    }

    // Finish the row sums across the quad, normalise, write lse = ln(sum exp(scaled)).
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 1);
        l_run[r] += __shfl_xor_sync(0xffffffffu, l_run[r], 2);
        inv[r] = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
    }
    if (tq == 0) {
        if (row_a < seq) lse[head * seq + row_a] = (m_run[0] + __log2f(l_run[0])) * LN2;
        if (row_b < seq) lse[head * seq + row_b] = (m_run[1] + __log2f(l_run[1])) * LN2;
    }

    // Stage the warp's 16 rows in its own rows of sQ (only this warp read them), then
    // write them out 16 bytes at a time.
    bf16* so = sQ + warp * 16 * SROW;
#pragma unroll
    for (int i = 0; i < DT; ++i) {
        const int col = i * 8 + tq * 2;
        *reinterpret_cast<unsigned*>(so + g * SROW + col) =
            pack_bf16(acc[i][0] * inv[0], acc[i][1] * inv[0]);
        *reinterpret_cast<unsigned*>(so + (g + 8) * SROW + col) =
            pack_bf16(acc[i][2] * inv[1], acc[i][3] * inv[1]);
    }
    __syncwarp();
    bf16* oh = o + head * seq * D;
#pragma unroll
    for (int i = 0; i < D / 16; ++i) {  // 16 rows x D/8 pieces, 32 lanes
        const int c = i * 32 + lane;
        const int r = c / (D / 8), piece = c % (D / 8);
        if (wrow + r < seq)
            *reinterpret_cast<uint4*>(oh + (size_t)(wrow + r) * D + piece * 8) =
                *reinterpret_cast<const uint4*>(so + r * SROW + piece * 8);
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    attention_fwd(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* lse,
                  float scale, int batch, int heads, int seq, int dim, bool causal)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    bf16* smem = reinterpret_cast<bf16*>(smem_raw);
    if (dim == 128) {
        attention_tile<128>(q, k, v, o, lse, scale, seq, causal, smem);
    } else if (dim == 64) {
        attention_tile<64>(q, k, v, o, lse, scale, seq, causal, smem);
    } else {
        // Not compiled for this head dim: make every output of the block NaN.
        const int m0 = (gridDim.x - 1 - blockIdx.x) * BLOCK_M;
        const size_t head = blockIdx.y;
        for (int r = m0; r < min(seq, m0 + BLOCK_M); ++r) {
            for (int c = threadIdx.x; c < dim; c += THREADS)
                o[(head * seq + r) * dim + c] = __ushort_as_bfloat16(0x7FC0);
            if (threadIdx.x == 0) lse[head * seq + r] = __int_as_float(0x7FC00000);
        }
    }
    (void)batch;
    (void)heads;
}
