// One thread per element. Consecutive threads of a warp read consecutive input
// addresses (coalesced) but write addresses `rows` floats apart (one transaction
// per element): the baseline the tiled versions improve on.
// kplay: grid=(ceil_div(cols,32),ceil_div(rows,8)) block=(32,8)

extern "C" __global__ void transpose(const float* __restrict__ inp, float* __restrict__ out,
                                     int rows, int cols) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && c < cols) {
        out[(size_t)c * rows + r] = inp[(size_t)r * cols + c];
    }
}
