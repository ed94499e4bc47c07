// out[i] = a[i] + b[i] for every 0 <= i < n.
// Default launch: grid = ceil_div(n, 256) blocks of 256 threads, one element per thread.
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    // TODO: compute this thread's global index i from blockIdx.x, blockDim.x and
    // threadIdx.x, then write out[i] = a[i] + b[i]. The grid is rounded up to whole
    // blocks, so some threads of the last block have i >= n: they must not touch memory.
}
