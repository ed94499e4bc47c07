// out[i] = alpha * x[i] + y[i] for every 0 <= i < n.
// Default launch: grid = ceil_div(n, 256) blocks of 256 threads, one element per thread.
extern "C" __global__ void saxpy(float alpha, const float* x, const float* y, float* out, int n)
{
    // TODO: find this thread's element i, and if it lies inside the vector write
    // out[i] = alpha * x[i] + y[i]. Leave x and y untouched.
}
