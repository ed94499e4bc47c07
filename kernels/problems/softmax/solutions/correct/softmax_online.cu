// One block per row. Pass 1 keeps a running (max, sum of exp) per thread, rescaling
// the sum whenever the max grows, so the row is read once for both statistics;
// warp shuffles and a few words of shared memory merge the partials. Pass 2 reads
// the row again (mostly from L2) and writes exp(x - max) / sum. Both passes load
// UNROLL values per thread before using them, to keep enough bytes in flight.
// __expf (ex2.approx) errs by about 1e-6 relative for the exponents that matter
// here, well inside the tolerance. Any blockDim.x that is a multiple of 32 works.

#include <math_constants.h>

#define UNROLL 4

struct Stats {
    float m;  // running maximum
    float s;  // sum of exp(x - m)
};

// Merging with an empty partial (m = -inf, s = 0) must not produce exp(-inf + inf).
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

__device__ Stats row_stats(const float* __restrict__ xr, int cols) {
    const int stride = blockDim.x;
    Stats st = {-CUDART_INF_F, 0.0f};
    int c = threadIdx.x;
    for (; c + (UNROLL - 1) * stride < cols; c += UNROLL * stride) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = xr[c + u * stride];
        float m = st.m;
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) m = fmaxf(m, v[u]);
        float s = st.m == m ? st.s : st.s * __expf(st.m - m);
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) s += __expf(v[u] - m);
        st = {m, s};
    }
    for (; c < cols; c += stride) st = merge(st, Stats{xr[c], 1.0f});
    return st;
}

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   int rows, int cols) {
    __shared__ Stats partial[32];
    __shared__ Stats total;
    const size_t base = (size_t)blockIdx.x * cols;
    const float* xr = x + base;
    float* outr = out + base;
    const int lane = threadIdx.x & 31;
    const int warp = threadIdx.x >> 5;
    const int nwarps = blockDim.x >> 5;

    Stats st = warp_merge(row_stats(xr, cols));
    if (lane == 0) partial[warp] = st;
    __syncthreads();
    if (warp == 0) {
        st = lane < nwarps ? partial[lane] : Stats{-CUDART_INF_F, 0.0f};
        st = warp_merge(st);
        if (lane == 0) total = st;
    }
    __syncthreads();

    const float m = total.m;
    const float inv = 1.0f / total.s;
    const int stride = blockDim.x;
    int c = threadIdx.x;
    for (; c + (UNROLL - 1) * stride < cols; c += UNROLL * stride) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) v[u] = xr[c + u * stride];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) outr[c + u * stride] = __expf(v[u] - m) * inv;
    }
    for (; c < cols; c += stride) outr[c] = __expf(xr[c] - m) * inv;
}
