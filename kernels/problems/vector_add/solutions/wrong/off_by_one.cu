// WRONG: the guard stops one element early (i < n - 1), so out[n-1] is never written
// and keeps its poison. With all-zero inputs and a zeroed output it would look right.
extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n - 1) {
        out[i] = a[i] + b[i];
    }
}
