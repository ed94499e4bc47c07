// Pingpong 128x128x64, cluster 2x1, fp32 D (the gemm_bf16 problem's contract).
#include "builder_config.cuh"

namespace {
using Cfg = builder_bench::Pingpong<128, 128, 64, 2, 1, float>;
const builder_bench::Register kRegistered{builder_bench::describe<Cfg>(13, "pingpong")};
}  // namespace
