// out = a + b in CuTe: the vectors as tensors, each block's 1024-element tile of them,
// and each thread's four elements of that tile (strided by 256, so a warp's loads stay
// coalesced). An identity tensor gives every element's index for the edge test.
// kplay: grid=ceil_div(n,1024) block=256

#include <cute/tensor.hpp>

using namespace cute;

extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n) {
    Tensor ga = local_tile(make_tensor(make_gmem_ptr(a), make_shape(n)), Shape<_1024>{}, blockIdx.x);
    Tensor gb = local_tile(make_tensor(make_gmem_ptr(b), make_shape(n)), Shape<_1024>{}, blockIdx.x);
    Tensor go = local_tile(make_tensor(make_gmem_ptr(out), make_shape(n)), Shape<_1024>{}, blockIdx.x);
    Tensor at = local_tile(make_identity_tensor(make_shape(n)), Shape<_1024>{}, blockIdx.x);

    auto threads = Layout<Shape<_256>>{};
    Tensor ta = local_partition(ga, threads, threadIdx.x);  // (4)
    Tensor tb = local_partition(gb, threads, threadIdx.x);
    Tensor to = local_partition(go, threads, threadIdx.x);
    Tensor ti = local_partition(at, threads, threadIdx.x);
    CUTE_UNROLL
    for (int i = 0; i < size(to); ++i)
        if (elem_less(ti(i), make_coord(n))) to(i) = ta(i) + tb(i);
}
