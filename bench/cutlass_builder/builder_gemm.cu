// builder_gemm: CUTLASS collective-builder Hopper GEMMs against cuBLAS, in one process.
//
// A (M x K) and B (K x N) are row-major bf16 drawn uniformly in [-1, 1]; every GEMM
// accumulates in fp32 and writes row-major D, in fp32 (the gemm_bf16 problem's contract)
// or in bf16 (what torch.matmul gives). The baselines are cublasGemmEx with the same two
// contracts, timed before and after the CUTLASS kernels by the same method; a CUTLASS row's
// pct_of_cublas is against the faster of the two cuBLAS medians with its output type (a
// cuBLAS row's median_us is that one; median_us_before and median_us_after are both).
//
// Timing: before every rep a read-only sweep of a 256 MiB buffer evicts A, B and D from
// L2 (and leaves no dirty lines behind to be written back inside the timed interval);
// CUDA events bracket the GEMM alone. Warm-up reps first, then the median of the reps.
// Correctness: each CUTLASS output (filled with NaN first) against cuBLAS's with the same
// output type: max |D - D_cublas| / max |D_cublas|.
//
//   builder_gemm [--size S | --m M --n N --k K] [--reps R] [--warmup W] [--cap-s T]
//                [--swizzle S] [--only SUBSTR] [--list]
// One JSON object per line on stdout; progress on stderr. --list prints each
// configuration's compile-time facts (stages, shared memory) without touching the GPU.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cutlass/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench_kernels.cuh"
#include "registry.h"

namespace builder_bench {
std::vector<ConfigInfo>& registry() {
  static std::vector<ConfigInfo> configs;
  return configs;
}
}  // namespace builder_bench

using namespace builder_bench;

#define CUBLAS_CHECK(x)                                                            \
  do {                                                                             \
    cublasStatus_t s_ = (x);                                                       \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                             \
      std::fprintf(stderr, "%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #x, \
                   static_cast<int>(s_));                                          \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

namespace {

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(1);
      }
      return argv[++i];
    };
    if (a == "--size") {
      o.m = o.n = o.k = std::atoi(next());
    } else if (a == "--m") {
      o.m = std::atoi(next());
    } else if (a == "--n") {
      o.n = std::atoi(next());
    } else if (a == "--k") {
      o.k = std::atoi(next());
    } else if (a == "--reps") {
      o.reps = std::atoi(next());
    } else if (a == "--warmup") {
      o.warmup = std::atoi(next());
    } else if (a == "--cap-s") {
      o.cap_s = std::atof(next());
    } else if (a == "--swizzle") {
      o.swizzle = std::atoi(next());
    } else if (a == "--only") {
      o.only = next();
    } else if (a == "--list") {
      o.list = true;
    } else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      std::exit(1);
    }
  }
  if (o.m <= 0 || o.n % 8 != 0 || o.k % 8 != 0 || o.n <= 0 || o.k <= 0 || o.reps < 1) {
    std::fprintf(stderr, "need M > 0, N and K positive multiples of 8, reps >= 1\n");
    std::exit(1);
  }
  return o;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c == '\n') ? ' ' : c;
  }
  return out + "\"";
}

// A number for JSON: null where it is not finite (an output with NaN in it).
std::string num(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string config_fields(const ConfigInfo& c) {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "\"config\": %s, \"schedule\": %s, \"tile\": %s, \"cluster\": %s, "
                "\"out\": \"%s\", \"stages\": %d, \"smem_bytes\": %d, "
                "\"epilogue_smem_bytes\": %d, \"threads\": %d",
                quoted(c.name).c_str(), quoted(c.schedule).c_str(), quoted(c.tile).c_str(),
                quoted(c.cluster).c_str(), c.out_bf16 ? "bf16" : "f32", c.stages, c.smem_bytes,
                c.epilogue_smem_bytes, c.threads);
  return buf;
}

// cuBLAS is column-major: row-major D = A @ B is column-major D^T = B^T A^T, so B comes
// first and M and N swap places; every leading dimension is a row length.
bool cublas_gemm(cublasHandle_t h, const Options& o, const void* a, const void* b, void* d,
                 bool bf16_out) {
  const float one = 1.0f, zero = 0.0f;
  return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, o.n, o.m, o.k, &one, b, CUDA_R_16BF, o.n, a,
                      CUDA_R_16BF, o.k, &zero, d, bf16_out ? CUDA_R_16BF : CUDA_R_32F, o.n,
                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
}

// cuBLAS's fp32 result at 64 sampled elements against a host fp64 dot product, relative
// to the sum of the products' magnitudes.
double sample_check(const Options& o, const void* da, const void* db, const float* dc) {
  std::vector<__nv_bfloat16> a(size_t(o.m) * o.k), b(size_t(o.k) * o.n);
  std::vector<float> c(size_t(o.m) * o.n);
  CUDA_CHECK(cudaMemcpy(a.data(), da, a.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(b.data(), db, b.size() * 2, cudaMemcpyDeviceToHost));
  CUDA_CHECK(cudaMemcpy(c.data(), dc, c.size() * 4, cudaMemcpyDeviceToHost));
  double worst = 0;
  uint64_t s = 12345;
  for (int t = 0; t < 64; ++t) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    int i = int((s >> 33) % uint64_t(o.m));
    int j = int((s >> 13) % uint64_t(o.n));
    double acc = 0, mag = 0;
    for (int kk = 0; kk < o.k; ++kk) {
      double p = double(__bfloat162float(a[size_t(i) * o.k + kk])) *
                 double(__bfloat162float(b[size_t(kk) * o.n + j]));
      acc += p;
      mag += std::fabs(p);
    }
    worst = std::max(worst, std::fabs(double(c[size_t(i) * o.n + j]) - acc) / (mag + 1e-30));
  }
  return worst;
}

// One line of the output: a CUTLASS configuration, or cuBLAS with one output type.
struct Row {
  const ConfigInfo* cfg = nullptr;  // null: a cuBLAS row
  std::string name;
  bool bf16 = false;
  Timing t, t_after;  // t_after: cuBLAS's second timing
  Error err;
  std::string error;
};

double tflops(const Options& o, double us) {
  return us > 0 ? 2.0 * o.m * o.n * double(o.k) / (us * 1e-6) / 1e12 : 0.0;
}

int run_all(const Options& opt, const std::vector<const ConfigInfo*>& chosen) {
  Bench b;
  b.opt = opt;
  CUDA_CHECK(cudaSetDevice(0));
  cudaDeviceProp prop;
  CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
  if (prop.major != 9) {
    std::printf("{\"kind\": \"error\", \"error\": \"needs sm_90 (Hopper); device %s is sm_%d%d\"}\n",
                prop.name, prop.major, prop.minor);
    return 3;
  }
  b.sm_count = prop.multiProcessorCount;
  CUDA_CHECK(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking));
  CUDA_CHECK(cudaEventCreate(&b.start));
  CUDA_CHECK(cudaEventCreate(&b.stop));
  const size_t flush_bytes = size_t(256) << 20;
  b.flush_vecs = flush_bytes / sizeof(uint4);
  CUDA_CHECK(cudaMalloc(&b.flush_buf, flush_bytes));
  CUDA_CHECK(cudaMemset(b.flush_buf, 0, flush_bytes));
  CUDA_CHECK(cudaMalloc(&b.sink, 4 * sizeof(unsigned)));

  const size_t mk = size_t(opt.m) * opt.k, kn = size_t(opt.k) * opt.n, mn = size_t(opt.m) * opt.n;
  __nv_bfloat16 *a = nullptr, *bm = nullptr;
  void *ref32 = nullptr, *ref16 = nullptr, *out = nullptr;
  CUDA_CHECK(cudaMalloc(&a, mk * 2));
  CUDA_CHECK(cudaMalloc(&bm, kn * 2));
  CUDA_CHECK(cudaMalloc(&ref32, mn * 4));
  CUDA_CHECK(cudaMalloc(&ref16, mn * 2));
  CUDA_CHECK(cudaMalloc(&out, mn * 4));
  fill_uniform_bf16<<<b.sm_count * 8, 256, 0, b.stream>>>(a, mk, 11);
  fill_uniform_bf16<<<b.sm_count * 8, 256, 0, b.stream>>>(bm, kn, 12);
  CUDA_CHECK(cudaStreamSynchronize(b.stream));

  cublasHandle_t h;
  CUBLAS_CHECK(cublasCreate(&h));
  CUBLAS_CHECK(cublasSetStream(h, b.stream));
  CUBLAS_CHECK(cublasSetPointerMode(h, CUBLAS_POINTER_MODE_HOST));
  void* cublas_ws = nullptr;  // 32 MiB, as PyTorch gives cuBLAS on Hopper
  const size_t cublas_ws_bytes = size_t(32) << 20;
  CUDA_CHECK(cudaMalloc(&cublas_ws, cublas_ws_bytes));
  CUBLAS_CHECK(cublasSetWorkspace(h, cublas_ws, cublas_ws_bytes));
  int cublas_version = 0;
  CUBLAS_CHECK(cublasGetVersion(h, &cublas_version));
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver);
  std::printf("{\"kind\": \"device\", \"name\": %s, \"sm_count\": %d, \"l2_bytes\": %d, "
              "\"cuda_runtime\": %d, \"driver\": %d, \"cublas\": %d, \"cutlass\": \"%d.%d.%d\", "
              "\"M\": %d, \"N\": %d, \"K\": %d, \"reps\": %d, \"warmup\": %d, \"swizzle\": %d, "
              "\"flush_mib\": 256}\n",
              quoted(prop.name).c_str(), prop.multiProcessorCount, prop.l2CacheSize, runtime,
              driver, cublas_version, CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, opt.m, opt.n,
              opt.k, opt.reps, opt.warmup, opt.swizzle);
  std::fflush(stdout);

  Row cub[2];
  double cublas_sample_err = 0;
  for (int bf = 0; bf < 2; ++bf) {
    void* ref = bf ? ref16 : ref32;
    cub[bf].name = bf ? "cublas_gemmex_bf16" : "cublas_gemmex_f32";
    cub[bf].bf16 = bf;
    if (!cublas_gemm(h, opt, a, bm, ref, bf)) {
      cub[bf].error = "cublasGemmEx failed";
      continue;
    }
    CUDA_CHECK(cudaStreamSynchronize(b.stream));
    if (!bf) cublas_sample_err = sample_check(opt, a, bm, static_cast<const float*>(ref32));
    cub[bf].t = b.time([&] { return cublas_gemm(h, opt, a, bm, out, bf); });
    std::fprintf(stderr, "%s: %.1f us\n", cub[bf].name.c_str(), cub[bf].t.median_us);
  }

  Problem p{opt.m, opt.n, opt.k, a, bm, out, b.sm_count, opt.swizzle};
  std::vector<Row> rows;
  bool poisoned = false;  // a kernel fault ends the context: no more GPU work
  for (const ConfigInfo* c : chosen) {
    Row r;
    r.cfg = c;
    r.name = c->name;
    r.bf16 = c->out_bf16;
    std::unique_ptr<GemmOp> op = c->make();
    r.error = op->setup(p);
    if (r.error.empty()) {
      CUDA_CHECK(cudaMemsetAsync(out, 0xFF, mn * 4, b.stream));  // NaN in fp32 and bf16
      bool launched = op->launch(b.stream);
      cudaError_t e = cudaStreamSynchronize(b.stream);
      if (!launched || e != cudaSuccess) {
        cudaError_t why = e != cudaSuccess ? e : cudaGetLastError();
        r.error = std::string("launch failed: ") + cudaGetErrorString(why);
        if (e != cudaSuccess) {  // a fault poisons the context: report what is known
          poisoned = true;
          rows.push_back(r);
          std::fprintf(stderr, "%s: %s; stopping\n", r.name.c_str(), r.error.c_str());
          break;
        }
      } else {
        r.err = c->out_bf16 ? compare<__nv_bfloat16>(out, ref16, mn, b.sink + 2, b)
                            : compare<float>(out, ref32, mn, b.sink + 2, b);
        r.t = b.time([&] { return op->launch(b.stream); });
        if (!r.t.ok) r.error = "launch failed while timing";
      }
    }
    std::fprintf(stderr, "%s: %.1f us, err %.2e %s\n", r.name.c_str(), r.t.median_us, r.err.rel,
                 r.error.c_str());
    rows.push_back(r);
  }
  for (int bf = 0; bf < 2; ++bf) {
    if (cub[bf].error.empty() && !poisoned) {
      cub[bf].t_after = b.time([&] { return cublas_gemm(h, opt, a, bm, out, bf); });
    }
  }

  double base[2];
  for (int bf = 0; bf < 2; ++bf) {
    base[bf] = cub[bf].t_after.ok ? std::min(cub[bf].t.median_us, cub[bf].t_after.median_us)
                                  : cub[bf].t.median_us;
    std::printf("{\"kind\": \"row\", \"config\": %s, \"out\": \"%s\", \"M\": %d, \"N\": %d, "
                "\"K\": %d, \"median_us\": %.2f, \"median_us_before\": %.2f, "
                "\"median_us_after\": %.2f, \"min_us\": %.2f, "
                "\"reps\": %d, \"tflops\": %.1f, \"pct_of_cublas\": 100.0, \"max_err\": null, "
                "\"sample_err\": %s, \"error\": %s}\n",
                quoted(cub[bf].name).c_str(), bf ? "bf16" : "f32", opt.m, opt.n, opt.k, base[bf],
                cub[bf].t.median_us, cub[bf].t_after.median_us, cub[bf].t.min_us, cub[bf].t.reps,
                tflops(opt, base[bf]), bf ? "null" : num(cublas_sample_err).c_str(),
                cub[bf].error.empty() ? "null" : quoted(cub[bf].error).c_str());
  }
  bool all_ok = true;
  for (const Row& r : rows) {
    const double tol = r.bf16 ? 1e-2 : 1e-4;  // bf16 rounding vs fp32 summation order
    bool ok = r.error.empty() && r.err.rel <= tol;
    all_ok = all_ok && ok;
    double pct = (r.t.ok && base[r.bf16] > 0) ? 100.0 * base[r.bf16] / r.t.median_us : 0.0;
    std::printf("{\"kind\": \"row\", %s, \"M\": %d, \"N\": %d, \"K\": %d, \"median_us\": %.2f, "
                "\"min_us\": %.2f, \"reps\": %d, \"tflops\": %.1f, \"pct_of_cublas\": %.1f, "
                "\"max_err\": %s, \"max_abs_err\": %s, \"ok\": %s, \"error\": %s}\n",
                config_fields(*r.cfg).c_str(), opt.m, opt.n, opt.k, r.t.median_us, r.t.min_us,
                r.t.reps, tflops(opt, r.t.median_us), pct, num(r.err.rel).c_str(),
                num(r.err.abs).c_str(),
                ok ? "true" : "false", r.error.empty() ? "null" : quoted(r.error).c_str());
  }
  if (!poisoned) cublasDestroy(h);
  return all_ok ? 0 : 4;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parse(argc, argv);
  std::vector<ConfigInfo>& all = registry();
  std::sort(all.begin(), all.end(),
            [](const ConfigInfo& x, const ConfigInfo& y) { return x.order < y.order; });
  std::vector<const ConfigInfo*> chosen;
  for (const ConfigInfo& c : all) {
    if (opt.only.empty() || c.name.find(opt.only) != std::string::npos) chosen.push_back(&c);
  }
  if (opt.list) {
    for (const ConfigInfo* c : chosen) std::printf("{\"kind\": \"config\", %s}\n",
                                                   config_fields(*c).c_str());
    return 0;
  }
  return run_all(opt, chosen);
}
