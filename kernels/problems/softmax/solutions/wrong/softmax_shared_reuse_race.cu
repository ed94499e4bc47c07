// WRONG: the same shared buffer holds the partial maxima and then the partial sums,
// but there is no barrier between thread 0 reading the final maximum out of buf[0]
// and other threads overwriting buf with their sums. Threads that read buf[0] late
// may subtract a partial sum instead of the maximum: a race that shows on a GPU.
// kplay-expect: wrong-on-gpu-only

#include <math_constants.h>

#define THREADS 256

extern "C" __global__ void softmax(const float* __restrict__ x, float* __restrict__ out,
                                   int rows, int cols) {
    __shared__ float buf[THREADS];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* outr = out + (size_t)blockIdx.x * cols;
    const int tid = threadIdx.x;

    float m = -CUDART_INF_F;
    for (int c = tid; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    buf[tid] = m;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] = fmaxf(buf[tid], buf[tid + s]);
        __syncthreads();
    }
    m = buf[0];
    // (missing __syncthreads() here)

    float sum = 0.0f;
    for (int c = tid; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    buf[tid] = sum;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) buf[tid] += buf[tid + s];
        __syncthreads();
    }
    const float inv = 1.0f / buf[0];

    for (int c = tid; c < cols; c += blockDim.x) outr[c] = expf(xr[c] - m) * inv;
}
