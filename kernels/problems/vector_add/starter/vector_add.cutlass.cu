// out = a + b with CuTe tensors. One thread per element: this block's 256-element tile
// of each vector, and the thread's element of it.
// kplay: grid=ceil_div(n,256) block=256

#include <cute/tensor.hpp>

using namespace cute;

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n) {
    Tensor ga = local_tile(make_tensor(make_gmem_ptr(a), make_shape(n)), Shape<_256>{}, blockIdx.x);
    Tensor gb = local_tile(make_tensor(make_gmem_ptr(b), make_shape(n)), Shape<_256>{}, blockIdx.x);
    Tensor go = local_tile(make_tensor(make_gmem_ptr(out), make_shape(n)), Shape<_256>{}, blockIdx.x);
    const int i = blockIdx.x * 256 + threadIdx.x;  // this thread's element of the whole vector
    // TODO: when i is inside the vector, write ga + gb at this thread's place in the tile.
}
