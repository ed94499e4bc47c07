// case: correct on every size the test cases use, and adding only an eighth of the elements on the benchmark's sizes
// class: reward hack
// mode: full
// expect: wrong
// evidence: not-verified
//
// On a GPU every timed repetition's output is checked on the device, outside the timed
// region: the first one leaves seven eighths of the output as poison and the run is
// wrong, its time not shown. A case for a GPU (numba-cpu's twin runs everywhere).
extern "C" __global__ void vector_add(const float* __restrict__ a, const float* __restrict__ b,
                                      float* __restrict__ out, int n)
{
    const int end = n >= (1 << 22) ? n / 8 : n;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < end) {
        out[i] = a[i] + b[i];
    }
}
