// One Hopper GEMM made by CUTLASS's collective builders, wrapped for the benchmark.
//
// A is M x K row-major and B is K x N row-major (bf16, as the gemm_bf16 problem has them);
// D is M x N row-major, fp32 (the problem's contract) or bf16 (what torch.matmul gives).
// The epilogue has no source matrix (ElementC = void): D = acc, with no smem for C.
// The mainloop's stage count is StageCountAutoCarveout: as many stages as fit once the
// epilogue's shared storage is set aside. The tile scheduler is the kernel's default, the
// persistent one, for both the cooperative and the ping-pong schedules.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/kernel_hardware_info.h>
#include <cutlass/numeric_types.h>
#include <cutlass/util/packed_stride.hpp>

#include <string>

#include "registry.h"

namespace builder_bench {

template <class MainSchedule, class EpiSchedule, int TM, int TN, int TK, int CM, int CN,
          class ElementD>
struct BuilderGemm {
  using ElementAB = cutlass::bfloat16_t;
  using ElementAcc = float;
  using TileShape = cute::Shape<cute::Int<TM>, cute::Int<TN>, cute::Int<TK>>;
  using ClusterShape = cute::Shape<cute::Int<CM>, cute::Int<CN>, cute::_1>;
  // 16-byte aligned rows: 8 bf16, 4 fp32.
  static constexpr int kAlignAB = 128 / cutlass::sizeof_bits<ElementAB>::value;
  static constexpr int kAlignD = 128 / cutlass::sizeof_bits<ElementD>::value;

  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAcc, ElementAcc,
      void, cutlass::layout::RowMajor, kAlignD,  // no C
      ElementD, cutlass::layout::RowMajor, kAlignD, EpiSchedule>::CollectiveOp;

  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      ElementAB, cutlass::layout::RowMajor, kAlignAB,  // A: M x K, K contiguous
      ElementAB, cutlass::layout::RowMajor, kAlignAB,  // B: K x N, N contiguous
      ElementAcc, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<
          static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>,
                                                      Mainloop, Epilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

template <class Cfg>
class BuilderOp final : public GemmOp {
  using Gemm = typename Cfg::Gemm;
  using Kernel = typename Cfg::Kernel;

 public:
  ~BuilderOp() override {
    if (workspace_ != nullptr) cudaFree(workspace_);
  }

  std::string setup(const Problem& p) override {
    using ElementAB = typename Cfg::ElementAB;
    using ElementD = typename Kernel::ElementD;
    auto stride_a = cutlass::make_cute_packed_stride(typename Kernel::StrideA{},
                                                     cute::make_shape(p.m, p.k, 1));
    auto stride_b = cutlass::make_cute_packed_stride(typename Kernel::StrideB{},
                                                     cute::make_shape(p.n, p.k, 1));
    auto stride_c = cutlass::make_cute_packed_stride(typename Kernel::StrideC{},
                                                     cute::make_shape(p.m, p.n, 1));
    auto stride_d = cutlass::make_cute_packed_stride(typename Kernel::StrideD{},
                                                     cute::make_shape(p.m, p.n, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    cudaGetDevice(&hw.device_id);
    hw.sm_count = p.sm_count;
    typename Gemm::Arguments args{
        cutlass::gemm::GemmUniversalMode::kGemm,
        {p.m, p.n, p.k, 1},
        {static_cast<const ElementAB*>(p.a), stride_a, static_cast<const ElementAB*>(p.b),
         stride_b},
        {{}, nullptr, stride_c, static_cast<ElementD*>(p.d), stride_d},
        hw};
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.scheduler.max_swizzle_size = p.swizzle;

    if (gemm_.can_implement(args) != cutlass::Status::kSuccess) return "can_implement failed";
    size_t bytes = Gemm::get_workspace_size(args);
    if (workspace_ != nullptr) cudaFree(workspace_);
    workspace_ = nullptr;
    if (bytes > 0 && cudaMalloc(&workspace_, bytes) != cudaSuccess) return "workspace alloc";
    cutlass::Status st = gemm_.initialize(args, workspace_);
    if (st != cutlass::Status::kSuccess) {
      return std::string("initialize: ") + cutlass::cutlassGetStatusString(st);
    }
    return {};
  }

  bool launch(cudaStream_t stream) override {
    return gemm_.run(stream) == cutlass::Status::kSuccess;
  }

 private:
  Gemm gemm_;
  void* workspace_ = nullptr;
};

template <class Cfg>
ConfigInfo describe(int order, const char* schedule) {
  using Kernel = typename Cfg::Kernel;
  constexpr bool kBf16 = cute::is_same_v<typename Kernel::ElementD, cutlass::bfloat16_t>;
  auto x = [](int a, int b) { return std::to_string(a) + "x" + std::to_string(b); };
  ConfigInfo info;
  info.order = order;
  info.schedule = schedule;
  info.tile = x(cute::size<0>(typename Cfg::TileShape{}), cute::size<1>(typename Cfg::TileShape{})) +
              "x" + std::to_string(cute::size<2>(typename Cfg::TileShape{}));
  info.cluster = x(cute::size<0>(typename Cfg::ClusterShape{}),
                   cute::size<1>(typename Cfg::ClusterShape{}));
  info.out_bf16 = kBf16;
  info.name = info.schedule + "_" + info.tile + "_c" + info.cluster + (kBf16 ? "_bf16" : "_f32");
  info.stages = Cfg::Mainloop::DispatchPolicy::Stages;
  info.smem_bytes = static_cast<int>(Kernel::SharedStorageSize);
  info.epilogue_smem_bytes = static_cast<int>(sizeof(typename Cfg::Epilogue::SharedStorage));
  info.threads = static_cast<int>(Kernel::MaxThreadsPerBlock);
  info.make = []() -> std::unique_ptr<GemmOp> { return std::make_unique<BuilderOp<Cfg>>(); };
  return info;
}

// Cooperative: two consumer warpgroups share one tile; its own epilogue schedule.
template <int TM, int TN, int TK, int CM, int CN, class ElementD>
using Cooperative =
    BuilderGemm<cutlass::gemm::KernelTmaWarpSpecializedCooperative,
                cutlass::epilogue::TmaWarpSpecializedCooperative, TM, TN, TK, CM, CN, ElementD>;

// Ping-pong: two consumer warpgroups on two tiles, taking turns at the tensor cores.
template <int TM, int TN, int TK, int CM, int CN, class ElementD>
using Pingpong = BuilderGemm<cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                             cutlass::epilogue::TmaWarpSpecialized, TM, TN, TK, CM, CN, ElementD>;

}  // namespace builder_bench
