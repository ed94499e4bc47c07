// kplay-expect: wrong-on-gpu-only
// WRONG: no __syncthreads() between the steps of the shared-memory tree (nor after the
// partial sums are stored). A warp can read partial[tid + s] before the warp that owns
// that slot has written it, picking up a stale value left by an earlier block. In a
// simulator that runs threads in lock-step it may look right; on a GPU it races.
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
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            partial[tid] += partial[tid + s];
        }
    }
    if (tid == 0) {
        atomicAdd(out, partial[0]);
    }
}
