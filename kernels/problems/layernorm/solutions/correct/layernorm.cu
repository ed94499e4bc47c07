// One block per row, two passes over values held in registers: x is read once and out
// written once (8 bytes an element, the floor).
//
// Rows of up to PER_THREAD * blockDim.x values (4096 with the default 256 threads) are
// loaded into registers, as float4 when the row starts on a 16-byte boundary
// (cols % 4 == 0). The block reduces the sum (the mean), then the sum of squared
// differences from that mean (the variance), both from the registers, and writes
// (x - mean) * rsqrt(var + eps) * gamma + beta. Subtracting the mean before squaring
// keeps the variance exact enough on rows near +-1000, where E[x^2] - mean^2 is not.
//
// Longer rows take the streaming path: the same two reductions over three walks of the
// row (sum, squared differences, output); the second and third read it again.
// Any blockDim.x that is a multiple of 32, up to 1024, works.
//
// Predicted, not measured: at 32768x4096 the floor is 8 * 32768 * 4096 + 8 * 4096 bytes
// (1 GiB and 32 KiB), which takes 252 us at the H200's calibrated copy roof of 4262 GB/s
// (bench/RESULTS.md).

#define PER_THREAD 16  // floats a thread keeps in registers
#define VEC (PER_THREAD / 4)

// The sum over the block, known to every thread. buf holds 32 floats; each call needs a
// buffer of its own (no barrier guards its reuse).
__device__ __forceinline__ float block_sum(float v, float* buf) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.0f;
    const int nwarps = blockDim.x >> 5;
    for (int w = 0; w < nwarps; ++w) total += buf[w];
    return total;
}

__device__ __forceinline__ void row_vec4(const float* __restrict__ xr, const float* __restrict__ gamma,
                                         const float* __restrict__ beta, float* __restrict__ outr,
                                         float eps, int cols) {
    __shared__ float buf_sum[32], buf_var[32];
    const float4* x4 = reinterpret_cast<const float4*>(xr);
    const int n4 = cols >> 2;
    float4 v[VEC];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < n4 ? __ldcs(x4 + i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        s += (v[k].x + v[k].y) + (v[k].z + v[k].w);
    }
    const float mean = block_sum(s, buf_sum) / (float)cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        if (threadIdx.x + k * blockDim.x < n4) {
            const float a = v[k].x - mean, b = v[k].y - mean, c = v[k].z - mean, d = v[k].w - mean;
            q += (a * a + b * b) + (c * c + d * d);
        }
    }
    const float rstd = rsqrtf(block_sum(q, buf_var) / (float)cols + eps);
    const float4* g4 = reinterpret_cast<const float4*>(gamma);
    const float4* b4 = reinterpret_cast<const float4*>(beta);
    float4* o4 = reinterpret_cast<float4*>(outr);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n4) {
            const float4 g = __ldg(g4 + i), b = __ldg(b4 + i);
            float4 o;
            o.x = (v[k].x - mean) * rstd * g.x + b.x;
            o.y = (v[k].y - mean) * rstd * g.y + b.y;
            o.z = (v[k].z - mean) * rstd * g.z + b.z;
            o.w = (v[k].w - mean) * rstd * g.w + b.w;
            __stcs(o4 + i, o);
        }
    }
}

__device__ __forceinline__ void row_scalar(const float* __restrict__ xr, const float* __restrict__ gamma,
                                           const float* __restrict__ beta, float* __restrict__ outr,
                                           float eps, int cols) {
    __shared__ float buf_sum[32], buf_var[32];
    float v[PER_THREAD];
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        v[k] = i < cols ? __ldcs(xr + i) : 0.0f;
        s += v[k];
    }
    const float mean = block_sum(s, buf_sum) / (float)cols;
    float q = 0.0f;
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const float d = threadIdx.x + k * blockDim.x < cols ? v[k] - mean : 0.0f;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf_var) / (float)cols + eps);
#pragma unroll
    for (int k = 0; k < PER_THREAD; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < cols) __stcs(outr + i, (v[k] - mean) * rstd * __ldg(gamma + i) + __ldg(beta + i));
    }
}

__device__ void row_streaming(const float* __restrict__ xr, const float* __restrict__ gamma,
                              const float* __restrict__ beta, float* __restrict__ outr, float eps,
                              int cols) {
    __shared__ float buf_sum[32], buf_var[32];
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    const float mean = block_sum(s, buf_sum) / (float)cols;
    float q = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        const float d = xr[c] - mean;
        q += d * d;
    }
    const float rstd = rsqrtf(block_sum(q, buf_var) / (float)cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        outr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
}

extern "C" __global__ void layernorm(const float* __restrict__ x, const float* __restrict__ gamma,
                                     const float* __restrict__ beta, float* __restrict__ out,
                                     float eps, int rows, int cols) {
    const size_t base = (size_t)blockIdx.x * cols;
    if (cols > PER_THREAD * (int)blockDim.x) {
        row_streaming(x + base, gamma, beta, out + base, eps, cols);
    } else if ((cols & 3) == 0) {
        row_vec4(x + base, gamma, beta, out + base, eps, cols);
    } else {
        row_scalar(x + base, gamma, beta, out + base, eps, cols);
    }
}
