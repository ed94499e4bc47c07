// WRONG: v's own term is taken against the maximum as it stood before v:
//     s = s * exp(m_old - m_new) + exp(v - m_old)      (should be exp(v - m_new))
// Whenever v raises the maximum its term counts exp(v - m_old) > 1 instead of 1. Each
// thread starts from the row's first value rather than -inf, so nothing becomes NaN:
// the sum is quietly too large and the probabilities too small. Rows of one value
// pass, as would a row whose first value is its largest; random rows fail.

#include <math_constants.h>

struct Stats {
    float m;  // running maximum
    float s;  // sum of exp(x - m) over the values seen
};

__device__ __forceinline__ Stats push(Stats st, float v) {
    const float m = fmaxf(st.m, v);
    const float s = st.s * __expf(st.m - m) + __expf(v - st.m);  // stale: should be v - m
    return {m, s};
}

// Two pairs become one: the same rescaling as push, for a pair instead of one value.
__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    const float m = fmaxf(a.m, b.m);
    const float sa = a.m == m ? a.s : a.s * __expf(a.m - m);
    const float sb = b.m == m ? b.s : b.s * __expf(b.m - m);
    return {m, sa + sb};
}

// The pair of the whole row, known to every thread of the block: merge within each
// warp by shuffles, then the per-warp pairs through shared memory.
__device__ Stats block_merge(Stats st) {
    __shared__ Stats partial[32];
    for (int offset = 16; offset > 0; offset >>= 1) {
        Stats o;
        o.m = __shfl_xor_sync(0xffffffffu, st.m, offset);
        o.s = __shfl_xor_sync(0xffffffffu, st.s, offset);
        st = merge(st, o);
    }
    if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = st;
    __syncthreads();
    Stats total = partial[0];
    for (int w = 1; w < (int)(blockDim.x >> 5); ++w) total = merge(total, partial[w]);
    return total;
}

extern "C" __global__ void softmax(const float* x, float* out, int rows, int cols) {
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* outr = out + (size_t)blockIdx.x * cols;

    Stats st = {xr[0], 0.0f};  // a finite maximum from the start
    for (int c = threadIdx.x; c < cols; c += blockDim.x) st = push(st, xr[c]);
    const Stats row = block_merge(st);

    const float inv = 1.0f / row.s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) outr[c] = __expf(xr[c] - row.m) * inv;
}
