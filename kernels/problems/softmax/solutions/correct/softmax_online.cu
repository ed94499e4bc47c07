// One block per row. Pass 1 keeps a running (max, sum of exp) per thread, rescaling
// the sum whenever the max grows, so the row is read once for both statistics;
// warp shuffles and a few words of shared memory merge the partials. Pass 2 reads
// the row again (mostly from L2) and writes exp(x - max) / sum.
// Works for any blockDim.x that is a multiple of 32, up to 1024.

#include <math_constants.h>

struct Stats {
    float m;  // running maximum
    float s;  // sum of exp(x - m)
};

// Merging with an empty partial (m = -inf, s = 0) must not produce exp(-inf + inf).
__device__ __forceinline__ Stats merge(Stats a, Stats b) {
    const float m = fmaxf(a.m, b.m);
    const float sa = a.m == m ? a.s : a.s * expf(a.m - m);
    const float sb = b.m == m ? b.s : b.s * expf(b.m - m);
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

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   int rows, int cols) {
    __shared__ Stats partial[32];
    __shared__ Stats total;
    const size_t base = (size_t)blockIdx.x * cols;
    const float* xr = x + base;
    float* outr = out + base;
    const int tid = threadIdx.x;
    const int lane = tid & 31;
    const int warp = tid >> 5;
    const int nwarps = blockDim.x >> 5;

    Stats st = {-CUDART_INF_F, 0.0f};
    for (int c = tid; c < cols; c += blockDim.x) {
        const float v = xr[c];
        if (v > st.m) {
            st.s = st.s * expf(st.m - v) + 1.0f;
            st.m = v;
        } else {
            st.s += expf(v - st.m);
        }
    }

    st = warp_merge(st);
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
    for (int c = tid; c < cols; c += blockDim.x) {
        outr[c] = expf(xr[c] - m) * inv;
    }
}
