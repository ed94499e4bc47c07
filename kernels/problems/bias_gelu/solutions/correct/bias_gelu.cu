// One row per blockIdx.y; each block covers 1024 columns of it, four consecutive columns
// a thread. When cols % 4 == 0 every row starts on a 16-byte boundary and the four values
// move as one float4 (x with the streaming hint: it is read once); otherwise as scalars.
// GELU in its exact form, 0.5 * v * (1 + erf(v / sqrt(2))), with the accurate erff.
//
// Predicted, not measured: at 16384x4096 the floor is 8 * 16384 * 4096 + 4 * 4096 bytes
// (512 MiB and 16 KiB), which take 126 us at the H200's calibrated copy roof of 4262 GB/s
// (bench/RESULTS.md).

#define COLS_PER_THREAD 4

__device__ __forceinline__ float gelu(float v) {
    return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
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
