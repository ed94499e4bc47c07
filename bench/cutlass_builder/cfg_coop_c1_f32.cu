// Cooperative 128x256x64, cluster 1x1, fp32 D (the gemm_bf16 problem's contract).
#include "builder_config.cuh"

namespace {
using Cfg = builder_bench::Cooperative<128, 256, 64, 1, 1, float>;
const builder_bench::Register kRegistered{builder_bench::describe<Cfg>(10, "cooperative")};
}  // namespace
