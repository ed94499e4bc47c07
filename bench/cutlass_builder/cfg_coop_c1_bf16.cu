// Cooperative 128x256x64, cluster 1x1, bf16 D (what torch.matmul gives).
#include "builder_config.cuh"

namespace {
using Cfg = builder_bench::Cooperative<128, 256, 64, 1, 1, cutlass::bfloat16_t>;
const builder_bench::Register kRegistered{builder_bench::describe<Cfg>(20, "cooperative")};
}  // namespace
