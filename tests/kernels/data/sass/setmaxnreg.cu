// Warp specialisation: the first warpgroup gives registers away to load, the second takes
// more to compute, as Hopper producer/consumer kernels do with setmaxnreg. The launch
// bounds name one block per SM, so ptxas knows the registers at entry and keeps both.
extern "C" __global__ void __launch_bounds__(256, 1) split_roles(const float* in, float* out, int n)
{
    int warpgroup = threadIdx.x / 128;
    int i = blockIdx.x * 128 + threadIdx.x % 128;
    if (warpgroup == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        if (i < n) out[i] = in[i];
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        float acc = 0.0f;
        for (int k = 0; k < 64; ++k) acc = acc * 0.5f + (i < n ? in[(i + k) % n] : 0.0f);
        if (i < n) out[i] += acc;
    }
}
