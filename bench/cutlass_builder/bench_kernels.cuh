// The benchmark's own small kernels (inputs, the L2 flush, the comparison) and its timer.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define CUDA_CHECK(x)                                                              \
  do {                                                                             \
    cudaError_t e_ = (x);                                                          \
    if (e_ != cudaSuccess) {                                                       \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x,               \
                   cudaGetErrorString(e_));                                        \
      std::exit(2);                                                                \
    }                                                                              \
  } while (0)

namespace builder_bench {

// Uniform in [-1, 1), rounded to bf16; element i depends only on (seed, i).
__global__ void fill_uniform_bf16(__nv_bfloat16* p, size_t n, uint64_t seed) {
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    float u = float(z >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
    p[i] = __float2bfloat16_rn(2.0f * u - 1.0f);
  }
}

// A read-only sweep of the flush buffer: its lines displace everything else in L2 and
// stay clean, so no write-back of the sweep lands inside the next timed interval. The
// store depends on every load and never happens for a zeroed buffer.
__global__ void flush_l2(const uint4* buf, size_t n, unsigned* sink) {
  unsigned acc = 0;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    uint4 v = buf[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

__device__ inline float as_float(float v) { return v; }
__device__ inline float as_float(__nv_bfloat16 v) { return __bfloat162float(v); }

// out[0] = max |x - ref| (NaN or inf counts as inf), out[1] = max |ref|; both as the
// bits of non-negative floats, which order like unsigned integers.
template <class T>
__global__ void max_diff(const T* x, const T* ref, size_t n, unsigned* out) {
  float worst = 0.0f, mag = 0.0f;
  size_t stride = size_t(gridDim.x) * blockDim.x;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float a = as_float(x[i]), b = as_float(ref[i]);
    float d = fabsf(a - b);
    if (!(d <= 3.0e38f)) d = __int_as_float(0x7f800000);  // NaN or inf: +inf
    worst = fmaxf(worst, d);
    mag = fmaxf(mag, fabsf(b));
  }
  unsigned w = __reduce_max_sync(0xffffffffu, __float_as_uint(worst));
  unsigned m = __reduce_max_sync(0xffffffffu, __float_as_uint(mag));
  if ((threadIdx.x & 31) == 0) {
    atomicMax(&out[0], w);
    atomicMax(&out[1], m);
  }
}

struct Options {
  int m = 4096, n = 4096, k = 4096;
  int reps = 100;
  int warmup = 10;
  double cap_s = 60.0;  // per GEMM; stops early past it, with at least 10 reps
  int swizzle = 1;
  std::string only;
  bool list = false;
};


struct Timing {
  double median_us = 0, min_us = 0;
  int reps = 0;
  bool ok = false;
};

// The GPU state every timed GEMM shares.
struct Bench {
  Options opt;
  cudaStream_t stream = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  uint4* flush_buf = nullptr;
  size_t flush_vecs = 0;
  unsigned* sink = nullptr;
  int sm_count = 0;

  void flush() {
    flush_l2<<<sm_count * 4, 512, 0, stream>>>(flush_buf, flush_vecs, sink);
  }

  template <class F>
  Timing time(F&& launch) {
    Timing t;
    for (int i = 0; i < opt.warmup; ++i) {
      flush();
      if (!launch()) return t;
    }
    CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> ms;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < opt.reps; ++i) {
      flush();
      CUDA_CHECK(cudaEventRecord(start, stream));
      if (!launch()) return t;
      CUDA_CHECK(cudaEventRecord(stop, stream));
      CUDA_CHECK(cudaEventSynchronize(stop));
      float e = 0;
      CUDA_CHECK(cudaEventElapsedTime(&e, start, stop));
      ms.push_back(e);
      double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (wall > opt.cap_s && ms.size() >= 10) break;
    }
    std::sort(ms.begin(), ms.end());
    size_t n = ms.size();
    double med = (n % 2) ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
    t.median_us = med * 1e3;
    t.min_us = ms.front() * 1e3;
    t.reps = static_cast<int>(n);
    t.ok = true;
    return t;
  }
};

struct Error {
  double rel = NAN, abs = NAN;  // NaN: not compared
};

template <class T>
Error compare(const void* x, const void* ref, size_t n, unsigned* scratch, Bench& b) {
  CUDA_CHECK(cudaMemsetAsync(scratch, 0, 2 * sizeof(unsigned), b.stream));
  max_diff<T><<<b.sm_count * 8, 256, 0, b.stream>>>(static_cast<const T*>(x),
                                                     static_cast<const T*>(ref), n, scratch);
  unsigned host[2];
  CUDA_CHECK(cudaMemcpyAsync(host, scratch, sizeof host, cudaMemcpyDeviceToHost, b.stream));
  CUDA_CHECK(cudaStreamSynchronize(b.stream));
  float d, r;
  std::memcpy(&d, &host[0], 4);
  std::memcpy(&r, &host[1], 4);
  return {r > 0 ? double(d) / double(r) : double(d), double(d)};
}

}  // namespace builder_bench
