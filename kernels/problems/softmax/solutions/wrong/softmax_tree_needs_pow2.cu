// WRONG: the shared-memory tree reduction halves n = min(cols, blockDim.x) each
// step, which only visits every partial when n is a power of two. For a row of,
// say, 33 values the partial of thread 32 is dropped from both the maximum and the
// sum. Right when cols is a power of two or at least the block size.

#include <math_constants.h>

#define THREADS 256

__device__ float reduce_max(float* buf, float v, int n) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = n / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + s]);
        __syncthreads();
    }
    const float r = buf[0];
    __syncthreads();
    return r;
}

__device__ float reduce_sum(float* buf, float v, int n) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int s = n / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
        __syncthreads();
    }
    const float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   int rows, int cols) {
    __shared__ float buf[THREADS];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* outr = out + (size_t)blockIdx.x * cols;
    const int n = min(cols, (int)blockDim.x);

    float m = -CUDART_INF_F;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = reduce_max(buf, m, n);

    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
    s = reduce_sum(buf, s, n);

    for (int c = threadIdx.x; c < cols; c += blockDim.x) outr[c] = expf(xr[c] - m) / s;
}
