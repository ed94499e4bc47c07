// WRONG: GELU by its tanh approximation, 0.5 * v * (1 + tanh(sqrt(2/pi) * (v + 0.044715
// v^3))), where the problem asks for the exact erf form (torch's default). The two agree
// to about 5e-4, far outside this problem's float32 tolerance near v = +-2.7. The same
// slip as bias_gelu_tanh_approximation.triton.py, in CUDA C++ (tanhf, accurate to a few
// ulps, so the approximation itself is what fails).

#define COLS_PER_THREAD 4

__device__ __forceinline__ float gelu(float v) {
    const float z = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(z));  // the tanh approximation, not erf
}

extern "C" __global__ void bias_gelu(const float* __restrict__ x, const float* __restrict__ bias,
                                     float* __restrict__ out, int rows, int cols) {
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * COLS_PER_THREAD;
    if (c >= cols) return;
    const size_t at = (size_t)blockIdx.y * cols + c;
    if ((cols & 3) == 0) {  // c + 3 < cols as well
        const float4 v = __ldcs(reinterpret_cast<const float4*>(x + at));
        const float4 b = __ldg(reinterpret_cast<const float4*>(bias + c));
        float4 o;
        o.x = gelu(v.x + b.x);
        o.y = gelu(v.y + b.y);
        o.z = gelu(v.z + b.z);
        o.w = gelu(v.w + b.w);
        __stcs(reinterpret_cast<float4*>(out + at), o);
    } else {
#pragma unroll
        for (int k = 0; k < COLS_PER_THREAD; ++k)
            if (c + k < cols) out[at + k] = gelu(x[at + k] + bias[c + k]);
    }
}
