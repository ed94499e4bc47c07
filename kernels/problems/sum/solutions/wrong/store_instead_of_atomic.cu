// WRONG: each block writes its total with a plain store instead of atomicAdd, so the
// blocks overwrite one another and out[0] ends up holding one block's sum. It is right
// only when the launch has a single block (n <= 2048 with the default launch).
#define THREADS 256

extern "C" __global__ void reduce_sum(const float* x, float* out, int n)
{
    __shared__ float partial[THREADS];
    const unsigned tid = threadIdx.x;
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += blockDim.x * gridDim.x) {
        acc += x[i];
    }
    partial[tid] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
        __syncthreads();
    }
    if (tid == 0) {
        out[0] = partial[0];
    }
}
