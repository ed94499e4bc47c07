// WRONG: the variance as E[x^2] - mean^2 in float32, from one walk that sums x and x^2
// together. Exact in real arithmetic; but on the rows near +-1000 with a spread of 1
// (rows 0 and 3 of every case) E[x^2] is about 1e6, where float32 values lie 0.06
// apart, and the rounding of the two sums swamps the variance (about 1), which can
// even come out negative (NaN after the square root). Ordinary rows pass.

__device__ __forceinline__ float block_sum(float v, float* buf) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < (int)(blockDim.x >> 5); ++w) total += buf[w];
    return total;
}

extern "C" __global__ void layernorm(const float* x, const float* gamma, const float* beta,
                                     float* out, float eps, int rows, int cols) {
    __shared__ float buf_sum[32], buf_sq[32];
    const float* xr = x + (size_t)blockIdx.x * cols;
    float* outr = out + (size_t)blockIdx.x * cols;

    float s = 0.0f, q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float v = xr[c];
        s += v;
        q += v * v;
    }
    const float mean = block_sum(s, buf_sum) / (float)cols;
    const float var = block_sum(q, buf_sq) / (float)cols - mean * mean;
    const float rstd = rsqrtf(var + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        outr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}
