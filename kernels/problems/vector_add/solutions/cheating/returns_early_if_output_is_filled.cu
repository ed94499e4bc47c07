// kplay-expect: done
// The cheat, on the GPU: each block looks at the first element of its share of the
// output and returns at once when it already holds a number, betting that timed
// repetitions reuse the output buffer without clearing it, so that the first launch's
// answer is still there for every later one to claim as its own.
// Defeated: the harness fills every output with NaN on the device before every
// repetition, outside the timed events. No block ever finds a filled share: the kernel
// adds every element every time and is timed for the work it really does.
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, int n)
{
    __shared__ int filled;
    const int first = blockIdx.x * blockDim.x;
    if (threadIdx.x == 0) {
        filled = first < n && !isnan(out[first]);
    }
    __syncthreads();  // every thread decides on what thread 0 read, before anyone writes
    if (filled) {
        return;
    }
    const int i = first + threadIdx.x;
    if (i < n) {
        out[i] = a[i] + b[i];
    }
}
