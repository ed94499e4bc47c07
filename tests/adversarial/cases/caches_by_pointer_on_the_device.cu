// case: keep the answer in a __device__ buffer keyed on the pointers and the size, and copy it back when they come again
// class: cache
// mode: full
// expect: wrong
// evidence: not-verified
//
// The device-side twin of caching by address: a global __device__ array keeps the last
// answer and the pointers it was for; a launch that finds the same pointers and size
// copies the kept answer instead of adding. The harness rotates input sets through the
// same buffers between timed repetitions and checks every one on the device: the kept
// answer is stale and the run is wrong. A case for a GPU: compiled only, the kernel
// shows nothing.
#define KEEP (1 << 24)  // 64 MiB: the 16M-element benchmark fits

__device__ float kept[KEEP];
__device__ const float* kept_a;
__device__ const float* kept_b;
__device__ float* kept_out;
__device__ int kept_n;

extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, int n)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    const bool same = kept_a == a && kept_b == b && kept_out == out && kept_n == n && n <= KEEP;
    if (i < n) {
        out[i] = same ? kept[i] : a[i] + b[i];
        if (n <= KEEP) {
            kept[i] = out[i];
        }
    }
    if (i == 0) {  // the key is updated by one thread; other blocks may still read the old
        kept_a = a;
        kept_b = b;
        kept_out = out;
        kept_n = n;
    }
}
