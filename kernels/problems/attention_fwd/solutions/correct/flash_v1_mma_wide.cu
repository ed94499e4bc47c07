// kplay: grid=(ceil_div(seq,128),batch*heads) block=128 smem=768*(dim+8)
// A wider variant of flash_v1_mma.cu (read that file first): the same FlashAttention
// forward with mma.sync m16n8k16, but each of the 4 warps owns 32 query rows (two m16
// fragments) instead of 16, so a block covers 128 queries.
//
// Why: in flash_v1_mma.cu every ldmatrix.x4 of K or V feeds 2 mma.sync; here it feeds 4,
// because both row fragments of the warp multiply the same K or V fragment. That halves
// the shared-memory bytes read per tensor-core instruction (512 bytes per 4 mma instead
// of per 2) and halves the K/V traffic from L2 per query (a 128-query tile reuses each
// K/V tile twice as often). The price is registers: the output accumulators double (128
// per thread at d = 128), so Q no longer stays in registers; its fragments are read from
// shared memory again for each key tile (one ldmatrix.x4 per row fragment and k-step,
// against 4 of K per k-step).
//
// Shared memory: (128 + 2*2*64) rows of (d + 8) bf16 = 104448 bytes at d = 128.

#include <cuda_bf16.h>

#define WARPS 4
#define MF 2                    // m16 row fragments per warp
#define WROWS (16 * MF)         // query rows per warp
#define BLOCK_M (WROWS * WARPS)
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
    const int wrow = m0 + warp * WROWS;       // first query row of this warp

    load_tile<D, BLOCK_M>(sQ, qh, m0, seq);
    load_tile<D, BLOCK_N>(sK, kh, 0, seq);
    load_tile<D, BLOCK_N>(sV, vh, 0, seq);
    cp_async_commit();

    float acc[MF][DT][4];
    float m_run[MF][2], l_run[MF][2];         // rows g and g+8 of each fragment
#pragma unroll
    for (int f = 0; f < MF; ++f) {
#pragma unroll
        for (int i = 0; i < DT; ++i) acc[f][i][0] = acc[f][i][1] = acc[f][i][2] = acc[f][i][3] = 0.0f;
        m_run[f][0] = m_run[f][1] = NEG_INF;
        l_run[f][0] = l_run[f][1] = 0.0f;
    }

    for (int t = 0; t < n_tiles; ++t) {
        const int buf = t & 1;
        if (t + 1 < n_tiles) {
            const int next = (t + 1) * BLOCK_N;
            load_tile<D, BLOCK_N>(sK + (buf ^ 1) * BLOCK_N * SROW, kh, next, seq);
            load_tile<D, BLOCK_N>(sV + (buf ^ 1) * BLOCK_N * SROW, vh, next, seq);
        }
        cp_async_commit();
        cp_async_wait<1>();  // all but the newest group: tile t (and Q) have landed
        __syncthreads();

        // S = Q K^T, fragment layouts as in flash_v1_mma.cu; each K fragment feeds MF rows.
        const bf16* kb = sK + buf * BLOCK_N * SROW;
        float s[MF][NT][4];
#pragma unroll
        for (int f = 0; f < MF; ++f)
#pragma unroll
            for (int i = 0; i < NT; ++i) s[f][i][0] = s[f][i][1] = s[f][i][2] = s[f][i][3] = 0.0f;
#pragma unroll
        for (int ks = 0; ks < KSTEPS; ++ks) {
            unsigned qa[MF][4];
#pragma unroll
            for (int f = 0; f < MF; ++f) {
                const int r = warp * WROWS + f * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
                ldmatrix_x4(qa[f], sQ + r * SROW + ks * 16 + (lane >> 4) * 8);
            }
#pragma unroll
            for (int np = 0; np < NT / 2; ++np) {
                unsigned b[4];
                const int key = np * 16 + (lane >> 4) * 8 + (lane & 7);
                ldmatrix_x4(b, kb + key * SROW + ks * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
                for (int f = 0; f < MF; ++f) {
                    mma_bf16(s[f][2 * np], qa[f], b[0], b[1]);
                    mma_bf16(s[f][2 * np + 1], qa[f], b[2], b[3]);
                }
            }
        }

        const int n0 = t * BLOCK_N;
#pragma unroll
        for (int f = 0; f < MF; ++f)
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                for (int e = 0; e < 4; ++e) s[f][nt][e] *= sl2;
        if (n0 + BLOCK_N > seq || (causal && n0 + BLOCK_N - 1 > wrow)) {
#pragma unroll
            for (int f = 0; f < MF; ++f)
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        const int col = n0 + nt * 8 + tq * 2 + (e & 1);
                        const int row = wrow + f * 16 + g + (e < 2 ? 0 : 8);
                        if (col >= seq || (causal && col > row)) s[f][nt][e] = NEG_INF;
                    }
        }

        // Online softmax per row fragment (a row lives in the 4 lanes of a quad).
#pragma unroll
        for (int f = 0; f < MF; ++f) {
            float mx[2] = {m_run[f][0], m_run[f][1]};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                mx[0] = fmaxf(mx[0], fmaxf(s[f][nt][0], s[f][nt][1]));
                mx[1] = fmaxf(mx[1], fmaxf(s[f][nt][2], s[f][nt][3]));
            }
            float alpha[2], base[2];
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
                base[r] = mx[r] == NEG_INF ? 0.0f : mx[r];
                alpha[r] = exp2_approx(m_run[f][r] - base[r]);
                m_run[f][r] = mx[r];
                l_run[f][r] *= alpha[r];
            }
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                s[f][nt][0] = exp2_approx(s[f][nt][0] - base[0]);
                s[f][nt][1] = exp2_approx(s[f][nt][1] - base[0]);
                s[f][nt][2] = exp2_approx(s[f][nt][2] - base[1]);
                s[f][nt][3] = exp2_approx(s[f][nt][3] - base[1]);
                l_run[f][0] += s[f][nt][0] + s[f][nt][1];
                l_run[f][1] += s[f][nt][2] + s[f][nt][3];
            }
#pragma unroll
            for (int i = 0; i < DT; ++i) {
                acc[f][i][0] *= alpha[0];
                acc[f][i][1] *= alpha[0];
                acc[f][i][2] *= alpha[1];
                acc[f][i][3] *= alpha[1];
            }
        }

        // O += P V: P's A fragments straight from the S registers; each V fragment
        // (ldmatrix .trans) feeds MF rows.
        const bf16* vb = sV + buf * BLOCK_N * SROW;
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; ++kk) {
            unsigned a[MF][4];
#pragma unroll
            for (int f = 0; f < MF; ++f) {
                a[f][0] = pack_bf16(s[f][2 * kk][0], s[f][2 * kk][1]);
                a[f][1] = pack_bf16(s[f][2 * kk][2], s[f][2 * kk][3]);
                a[f][2] = pack_bf16(s[f][2 * kk + 1][0], s[f][2 * kk + 1][1]);
                a[f][3] = pack_bf16(s[f][2 * kk + 1][2], s[f][2 * kk + 1][3]);
            }
#pragma unroll
            for (int dp = 0; dp < DT / 2; ++dp) {
                unsigned b[4];
                const int key = kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
                ldmatrix_x4_trans(b, vb + key * SROW + dp * 16 + (lane >> 4) * 8);
#pragma unroll
                for (int f = 0; f < MF; ++f) {
                    mma_bf16(acc[f][2 * dp], a[f], b[0], b[1]);
                    mma_bf16(acc[f][2 * dp + 1], a[f], b[2], b[3]);
                }
            }
        }
        // Every warp must be done with buffer `buf` (and with sQ, read again next tile)
        // before the next iteration's copies (tile t + 2) are issued into it.
        __syncthreads();
    }

    bf16* so = sQ + warp * WROWS * SROW;      // this warp's own rows of sQ
#pragma unroll
    for (int f = 0; f < MF; ++f) {
        float inv[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            l_run[f][r] += __shfl_xor_sync(0xffffffffu, l_run[f][r], 1);
            l_run[f][r] += __shfl_xor_sync(0xffffffffu, l_run[f][r], 2);
            inv[r] = l_run[f][r] > 0.0f ? 1.0f / l_run[f][r] : 0.0f;
            const int row = wrow + f * 16 + g + r * 8;
            if (tq == 0 && row < seq)
                lse[head * seq + row] = (m_run[f][r] + __log2f(l_run[f][r])) * LN2;
        }
#pragma unroll
        for (int i = 0; i < DT; ++i) {
            const int col = i * 8 + tq * 2;
            *reinterpret_cast<unsigned*>(so + (f * 16 + g) * SROW + col) =
                pack_bf16(acc[f][i][0] * inv[0], acc[f][i][1] * inv[0]);
            *reinterpret_cast<unsigned*>(so + (f * 16 + g + 8) * SROW + col) =
                pack_bf16(acc[f][i][2] * inv[1], acc[f][i][3] * inv[1]);
        }
    }
    __syncwarp();
    bf16* oh = o + head * seq * D;
#pragma unroll
    for (int i = 0; i < WROWS * D / 256; ++i) {  // WROWS rows x D/8 pieces, 32 lanes
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
