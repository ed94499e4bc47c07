// kplay: grid=ceil_div(n,1024) block=256
// WRONG: the float4 loop covers the first 4 * (n / 4) elements and nothing handles the
// remaining n % 4, so whenever n is not a multiple of 4 the last elements of out are
// never written (and n < 4 writes nothing at all).
extern "C" __global__ void saxpy(float alpha, const float* x, const float* y, float* out, int n)
{
    const int stride = blockDim.x * gridDim.x;
    const int n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const float4* y4 = reinterpret_cast<const float4*>(y);
    float4* out4 = reinterpret_cast<float4*>(out);
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) {
        float4 a = x4[i];
        float4 b = y4[i];
        out4[i] = make_float4(alpha * a.x + b.x, alpha * a.y + b.y,
                              alpha * a.z + b.z, alpha * a.w + b.w);
    }
}
