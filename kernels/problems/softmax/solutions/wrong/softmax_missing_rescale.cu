// WRONG: push() forgets the rescale. When v raises the running maximum, the sum so far
// is still measured against the old maximum and must be multiplied by exp(old - new)
// before v's term is added; here it is not, so those terms stay too large by
// exp(new - old), the row sum is too big and every probability too small. A thread
// that sees one value of its row (cols <= 256) never rescales: short rows pass, and
// the 2x1000 case (four values a thread) fails.

#include <math_constants.h>

struct Stats {
    float m;  // running maximum
    float s;  // sum of exp(x - m) over the values seen
};

__device__ __forceinline__ Stats push(Stats st, float v) {
    const float m = fmaxf(st.m, v);
    return {m, st.s + __expf(v - m)};  // (missing: st.s * exp(st.m - m))
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

    Stats st = {-CUDART_INF_F, 0.0f};
    for (int c = threadIdx.x; c < cols; c += blockDim.x) st = push(st, xr[c]);
    const Stats row = block_merge(st);

    const float inv = 1.0f / row.s;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) outr[c] = __expf(xr[c] - row.m) * inv;
}
