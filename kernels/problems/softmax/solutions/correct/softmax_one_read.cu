// One block per row, and each element of x read once and written once: 8 bytes an
// element, the floor for this problem.
//
// Rows of up to PER_THREAD * blockDim.x values (4096 with the default 256 threads) are
// held in registers: each thread loads its share (float4 loads when the row starts on
// a 16-byte boundary, i.e. cols % 4 == 0), reduces its own (max, sum of exp) pair over
// those registers, and the block merges the pairs with warp shuffles and one round of
// shared memory. The merge of two pairs is the online-softmax step: the smaller maximum's
// sum is rescaled by exp(its max - the larger max). The outputs are computed from the
// same registers, so x is never read twice.
//
// Longer rows do not fit: they take the streaming path, which keeps a running pair per
// thread over the row (read once), merges, then reads the row again for the outputs.
//
// Loads and stores use the streaming cache hints (__ldcs, __stcs) where a value is not
// read again.
// __expf (ex2.approx) errs by about 1e-6 relative here, well inside the tolerance.
// Any blockDim.x that is a multiple of 32, up to 1024, works.
//
// Predicted, not measured: at 32768x4096 the floor is 8 * 32768 * 4096 bytes = 1 GiB,
// which takes 252 us at the H200's calibrated copy roof of 4262 GB/s (bench/RESULTS.md).

#include <math_constants.h>

#define PER_THREAD 16  // floats a thread keeps in registers
#define VEC (PER_THREAD / 4)

struct Stats {
    float m;  // maximum
    float s;  // sum of exp(x - m)
};

// Merging with an empty pair (m = -inf, s = 0) must not produce exp(-inf + inf).
__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    const float m = fmaxf(a.m, b.m);
    const float sa = a.m == m ? a.s : a.s * __expf(a.m - m);
    const float sb = b.m == m ? b.s : b.s * __expf(b.m - m);
    return {m, sa + sb};
}

__device__ __forceinline__ Stats warp_merge(Stats v) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) {
        Stats o;
        o.m = __shfl_xor_sync(0xffffffffu, v.m, offset);
        o.s = __shfl_xor_sync(0xffffffffu, v.s, offset);
        v = merge(v, o);
    }
    return v;
}

// The row's pair, known to every thread: one barrier, then each thread merges the few
// per-warp pairs itself (a broadcast read of shared memory), so no second barrier.
__device__ __forceinline__ Stats block_merge(Stats st) {
    __shared__ Stats partial[32];
    st = warp_merge(st);
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = st;
    __syncthreads();
    Stats total = partial[0];
    const int nwarps = blockDim.x >> 5;
    for (int w = 1; w < nwarps; ++w) total = merge(total, partial[w]);
    return total;
}

// Rows that fit, cols % 4 == 0: float4 k of this thread is x4[threadIdx.x + k * blockDim.x].
__device__ __forceinline__ void row_vec4(const float* __restrict__ xr, float* __restrict__ outr,
                                         int cols) {
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    float4* o4 = reinterpret_cast<float4*>(outr);
    const int n4 = cols >> 2;
    float4 v[VEC];
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < n4 ? __ldcs(x4 + i)
                      : make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F);
    }
    float m = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < VEC; ++k) m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
    float s = 0.0f;
    if (m != -CUDART_INF_F) {  // a thread with no values keeps the empty pair
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            s += (__expf(v[k].x - m) + __expf(v[k].y - m)) + (__expf(v[k].z - m) + __expf(v[k].w - m));
    }
    const Stats row = block_merge(Stats{m, s});
    const float inv = 1.0f / row.s;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n4) {
            float4 o;
            o.x = __expf(v[k].x - row.m) * inv;
            o.y = __expf(v[k].y - row.m) * inv;
            o.z = __expf(v[k].z - row.m) * inv;
            o.w = __expf(v[k].w - row.m) * inv;
            __stcs(o4 + i, o);
        }
    }
}

// Rows that fit, any cols: value k of this thread is xr[threadIdx.x + k * blockDim.x].
__device__ __forceinline__ void row_scalar(const float* __restrict__ xr, float* __restrict__ outr,
                                           int cols) {
    float v[PER_THREAD];
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < cols ? __ldcs(xr + i) : -CUDART_INF_F;
    }
    float m = -CUDART_INF_F;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) m = fmaxf(m, v[k]);
    float s = 0.0f;
    if (m != -CUDART_INF_F) {
#pragma unroll
        for (int k = 0; k < PER_THREAD; ++k) s += __expf(v[k] - m);
    }
    const Stats row = block_merge(Stats{m, s});
    const float inv = 1.0f / row.s;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < cols) __stcs(outr + i, __expf(v[k] - row.m) * inv);
    }
}

// Rows longer than the registers hold: a running pair per thread, then a second read.
// With cols % 4 == 0 each step loads VEC float4s per thread before using any of them
// (enough bytes in flight), folds their own pair into the running one, and rescales once.
__device__ void row_streaming(const float* __restrict__ xr, float* __restrict__ outr, int cols) {
    Stats st = {-CUDART_INF_F, 0.0f};
    if ((cols & 3) == 0) {
        const float4* x4 = reinterpret_cast<const float4*>(xr);
        float4* o4 = reinterpret_cast<float4*>(outr);
        const int n4 = cols >> 2;
        const int step = VEC * blockDim.x;
        for (int i0 = threadIdx.x; i0 < n4; i0 += step) {
            float4 v[VEC];
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const int i = i0 + k * blockDim.x;
                v[k] = i < n4 ? x4[i]  // a plain load: the second pass may find it in L2
                              : make_float4(-CUDART_INF_F, -CUDART_INF_F, -CUDART_INF_F,
                                            -CUDART_INF_F);
            }
            float m = st.m;
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                m = fmaxf(m, fmaxf(fmaxf(v[k].x, v[k].y), fmaxf(v[k].z, v[k].w)));
            float s = st.m == m ? st.s : st.s * __expf(st.m - m);  // the online rescale
#pragma unroll
            for (int k = 0; k < VEC; ++k)
                s += (__expf(v[k].x - m) + __expf(v[k].y - m)) +
                     (__expf(v[k].z - m) + __expf(v[k].w - m));
            st = {m, s};  // m is finite: i0 < n4 holds for k = 0
        }
        const Stats row = block_merge(st);
        const float inv = 1.0f / row.s;
        for (int i = threadIdx.x; i < n4; i += blockDim.x) {
            const float4 a = __ldcs(x4 + i);
            float4 o;
            o.x = __expf(a.x - row.m) * inv;
            o.y = __expf(a.y - row.m) * inv;
            o.z = __expf(a.z - row.m) * inv;
            o.w = __expf(a.w - row.m) * inv;
            __stcs(o4 + i, o);
        }
        return;
    }
    for (int c = threadIdx.x; c < cols; c += blockDim.x) st = merge(st, Stats{xr[c], 1.0f});
    const Stats row = block_merge(st);
    const float inv = 1.0f / row.s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) outr[c] = __expf(xr[c] - row.m) * inv;
}

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   int rows, int cols) {
    const size_t base = (size_t)blockIdx.x * cols;
    if (cols > PER_THREAD * (int)blockDim.x) {
        row_streaming(x + base, out + base, cols);
    } else if ((cols & 3) == 0) {
        row_vec4(x + base, out + base, cols);
    } else {
        row_scalar(x + base, out + base, cols);
    }
}
