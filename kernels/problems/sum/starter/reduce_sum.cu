// out[0] = x[0] + x[1] + ... + x[n-1]. out[0] is zero when the kernel starts.
// Default launch: min(ceil_div(n, 2048), 1024) blocks of 256 threads.
extern "C" __global__ void reduce_sum(const float* x, float* out, int n)
{
    // Each thread adds up its own slice of x: elements i, i + stride, i + 2 * stride, ...
    float partial = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x) {
        partial += x[i];
    }

    // TODO: combine the 256 partial sums of this block (a tree in __shared__ memory with
    // __syncthreads() between steps, or warp shuffles), then let one thread of the block
    // add the block's total to out[0] with atomicAdd.
    (void)partial;
    (void)out;
}
