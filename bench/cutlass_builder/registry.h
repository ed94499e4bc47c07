// The configurations the benchmark knows, and what main() needs to know of each.
// Plain host C++: builder_gemm.cu includes it without the CUTLASS headers, and every
// cfg_*.cu adds one entry from a static initialiser (see builder_config.cuh).
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

namespace builder_bench {

// One GEMM: row-major A (m x k) and B (k x n) in bf16, row-major D (m x n), D = A @ B.
struct Problem {
  int m = 0, n = 0, k = 0;
  const void* a = nullptr;
  const void* b = nullptr;
  void* d = nullptr;
  int sm_count = 0;
  int swizzle = 1;  // the persistent scheduler's max_swizzle_size
};

class GemmOp {
 public:
  virtual ~GemmOp() = default;
  // Checks the problem, allocates the workspace and builds the kernel's parameters (TMA
  // descriptors included). Returns an empty string on success, else what failed.
  virtual std::string setup(const Problem& p) = 0;
  // Launches the kernel set up last, on `stream`; false if the launch failed.
  virtual bool launch(cudaStream_t stream) = 0;
};

struct ConfigInfo {
  int order = 0;            // the order rows are printed in
  std::string name;         // e.g. "cooperative_128x256x64_c1x1_f32"
  std::string schedule;     // "cooperative" or "pingpong"
  std::string tile;         // "128x256x64"
  std::string cluster;      // "1x1"
  bool out_bf16 = false;    // D in bf16 (else fp32, the problem's contract)
  int stages = 0;           // mainloop stages the builder chose
  int smem_bytes = 0;       // the kernel's shared storage
  int epilogue_smem_bytes = 0;
  int threads = 0;          // threads per CTA
  std::unique_ptr<GemmOp> (*make)() = nullptr;
};

std::vector<ConfigInfo>& registry();

struct Register {
  explicit Register(ConfigInfo info) { registry().push_back(std::move(info)); }
};

}  // namespace builder_bench
