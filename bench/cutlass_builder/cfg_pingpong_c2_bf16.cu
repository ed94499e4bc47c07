// Pingpong 128x128x64, cluster 2x1, bf16 D (what torch.matmul gives).
#include "builder_config.cuh"

namespace {
using Cfg = builder_bench::Pingpong<128, 128, 64, 2, 1, cutlass::bfloat16_t>;
const builder_bench::Register kRegistered{builder_bench::describe<Cfg>(23, "pingpong")};
}  // namespace
