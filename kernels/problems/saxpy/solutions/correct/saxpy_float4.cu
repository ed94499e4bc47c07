// kplay: grid=ceil_div(n,1024) block=256
// float4 accesses in a grid-stride loop, then a scalar tail for the last n % 4
// elements. Buffers from cudaMalloc are 256-byte aligned, so the float4 views are legal.
__device__ __forceinline__ float4 axpy4(float alpha, float4 x, float4 y)
{
    return make_float4(fmaf(alpha, x.x, y.x), fmaf(alpha, x.y, y.y),
                       fmaf(alpha, x.z, y.z), fmaf(alpha, x.w, y.w));
}

extern "C" __global__ void saxpy(float alpha, const float* __restrict__ x,
                                 const float* __restrict__ y, float* __restrict__ out, int n)
{
    const int stride = blockDim.x * gridDim.x;
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    const int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* out4 = reinterpret_cast<float4*>(out);

    for (int i = first; i < n4; i += stride) {
        out4[i] = axpy4(alpha, x4[i], y4[i]);
    }
    int tail = n4 * 4 + first;
    if (tail < n) {
        out[tail] = fmaf(alpha, x[tail], y[tail]);
    }
}
