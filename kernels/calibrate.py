"""Measuring a device's ceilings once, and caching them per device.

GPU: DRAM copy and read bandwidth (CuPy kernels), FP32 FMA peak (a register-resident
FMA kernel), matrix-unit peaks for fp16/bf16/tf32 (cuBLAS through torch, fp32 accumulate).
CPU: a STREAM-style triad, a read-only sum and an FMA peak, all through Numba. The triad's
and the sum's arrays are each at least 4x the last-level cache (kernels.sizing), so the
memory roof is DRAM's, the level the CPU benchmark cases are sized to live in.

`python -m kplay.kernels.calibrate gpu|cpu` measures the device this process sees (pinned
by CUDA_VISIBLE_DEVICES), caches and prints the ceilings as JSON: `kplay worker` runs it
in a child, so that no CUDA context is ever made in the supervising process.
"""

from __future__ import annotations

import datetime as dt
import sys
from typing import Any

import numpy as np

from kplay.kernels import hardware, roofline, sizing, timing
from kplay.kernels.models import Ceilings, TimingStage

_READ_SRC = r"""
extern "C" __global__ void read_sum(const float4* __restrict__ x, size_t n4, float* out) {
    float acc = 0.f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4;
         i += (size_t)gridDim.x * blockDim.x) {
        float4 v = x[i];
        acc += v.x + v.y + v.z + v.w;
    }
    if (acc == 12345.678f) out[0] = acc;  // keeps the loads alive, almost never stores
}
extern "C" __global__ void fma_peak(float* out, int iters, float a, float b) {
    float r0 = threadIdx.x, r1 = r0 + 1, r2 = r0 + 2, r3 = r0 + 3;
    float r4 = r0 + 4, r5 = r0 + 5, r6 = r0 + 6, r7 = r0 + 7;
    for (int i = 0; i < iters; ++i) {
        #pragma unroll
        for (int k = 0; k < 16; ++k) {
            r0 = fmaf(r0, a, b); r1 = fmaf(r1, a, b); r2 = fmaf(r2, a, b); r3 = fmaf(r3, a, b);
            r4 = fmaf(r4, a, b); r5 = fmaf(r5, a, b); r6 = fmaf(r6, a, b); r7 = fmaf(r7, a, b);
        }
    }
    float s = r0 + r1 + r2 + r3 + r4 + r5 + r6 + r7;
    if (s == 12345.678f) out[threadIdx.x] = s;
}
"""


def _seconds(us: float | None) -> float:
    if not us or us <= 0:
        raise RuntimeError("a calibration kernel produced no timing")
    return us * 1e-6


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def _spread(*stages: TimingStage) -> float:
    """The calibration's own noise: the largest relative IQR among its timings."""
    return max(((s.iqr_us or 0.0) / s.median_us for s in stages if s.median_us), default=0.0)


def calibrate_gpu(size_bytes: int = 2 * 2**30, cap_s: float = 3.0) -> Ceilings:
    import cupy

    gpu = hardware.current_gpu()
    sms = gpu.sm_count
    n = size_bytes // 4
    src = cupy.random.random(n, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    rt = cupy.cuda.runtime
    copy = timing.time_gpu(
        lambda: rt.memcpyAsync(dst.data.ptr, src.data.ptr, size_bytes, rt.memcpyDeviceToDevice, 0),
        cap_s=cap_s,
    )
    module = cupy.RawModule(code=_READ_SRC, options=("-std=c++17",))
    read_k = module.get_function("read_sum")
    out = cupy.zeros(1024, dtype=cupy.float32)
    grid = sms * 8
    read = timing.time_gpu(
        lambda: read_k((grid,), (512,), (src, np.uint64(n // 4), out)), cap_s=cap_s
    )
    fma_k = module.get_function("fma_peak")
    iters, threads, blocks = 2048, 256, sms * 16
    fma = timing.time_gpu(
        lambda: fma_k(
            (blocks,), (threads,), (out, np.int32(iters), np.float32(0.999), np.float32(0.001))
        ),
        cap_s=cap_s,
        flush_l2=False,
    )
    fma_flops = 2.0 * 8 * 16 * iters * threads * blocks
    tc, tc_spread = _matrix_peaks(cap_s)
    return Ceilings(
        device=gpu.name,
        kind="gpu",
        source="calibrated",
        copy_bytes_per_s=2 * size_bytes / _seconds(copy.median_us),
        read_bytes_per_s=size_bytes / _seconds(read.median_us),
        fp32_flops_per_s=fma_flops / _seconds(fma.median_us),
        measured_at=_now(),
        notes=f"copy and read over {size_bytes / 2**30:.0f} GiB, L2 flushed; "
        "matrix peaks: cuBLAS 8192^3 through torch, fp32 accumulate",
        spread=max(_spread(copy, read, fma), tc_spread),
        memory_level="DRAM",
        memory_buffer_bytes=size_bytes,
        **tc,
    )


def _matrix_peaks(cap_s: float) -> tuple[dict[str, float], float]:
    """The tensor-core peaks measured through torch, and the spread of their timings."""
    try:
        import torch
    except ImportError:
        return {}, 0.0
    if not torch.cuda.is_available():
        return {}, 0.0
    out: dict[str, float] = {}
    stages: list[TimingStage] = []
    size = 8192
    flops = 2.0 * size**3
    for field, dtype, tf32 in (
        ("fp16_tc_flops_per_s", torch.float16, False),
        ("bf16_tc_flops_per_s", torch.bfloat16, False),
        ("tf32_tc_flops_per_s", torch.float32, True),
    ):
        torch.backends.cuda.matmul.allow_tf32 = tf32
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        b = torch.randn(size, size, device="cuda", dtype=dtype)
        c = torch.empty(size, size, device="cuda", dtype=dtype)

        def product(a: Any = a, b: Any = b, c: Any = c) -> None:
            torch.matmul(a, b, out=c)

        stage = timing.time_gpu(product, cap_s=cap_s)
        out[field] = flops / _seconds(stage.median_us)
        stages.append(stage)
        del a, b, c
    torch.backends.cuda.matmul.allow_tf32 = False
    fp8 = _fp8_peak(torch, size, cap_s)
    if fp8 is not None:
        out["fp8_tc_flops_per_s"] = flops / _seconds(fp8.median_us)
        stages.append(fp8)
    return out, _spread(*stages)


def _fp8_peak(torch: Any, size: int, cap_s: float) -> TimingStage | None:
    """cuBLAS's FP8 GEMM (e4m3, bf16 out) through torch._scaled_mm with its fast
    accumulation, the fastest FP8 mode; None where the device has no FP8 tensor cores."""
    if torch.cuda.get_device_capability() < (8, 9) or not hasattr(torch, "_scaled_mm"):
        return None
    a = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(size, size, device="cuda").to(torch.float8_e4m3fn).t()  # column-major
    one = torch.ones((), device="cuda")

    def product() -> None:
        torch._scaled_mm(
            a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True
        )

    return timing.time_gpu(product, cap_s=cap_s)


# ------------------------------------------------------------------ CPU


def _cpu_kernels():  # type: ignore[no-untyped-def]
    import numba

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def triad(a, b, c, s):  # type: ignore[no-untyped-def]
        for i in numba.prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def read(a):  # type: ignore[no-untyped-def]
        acc = 0.0
        for i in numba.prange(a.shape[0]):
            acc += a[i]
        return acc

    return triad, read, _fma_kernel(64)


# Independent FMA chains per thread. The best count depends on the vector width and the
# latency of the FMA pipes (AVX2 needs fewer than AVX-512, and too many spill registers),
# so calibration tries each and keeps the fastest.
FMA_WIDTHS = (64, 128, 256)


def _fma_kernel(width: int):  # type: ignore[no-untyped-def]
    import numba

    @numba.njit(parallel=True, fastmath=True, cache=False)
    def fma(out, iters, x, y):  # type: ignore[no-untyped-def]
        # A constant width lets LLVM unroll the inner loop and keep acc in registers.
        for t in numba.prange(out.shape[0]):
            acc = np.empty(width, dtype=np.float32)
            for j in range(width):
                acc[j] = t + j
            for _ in range(iters):
                for j in range(width):
                    acc[j] = acc[j] * x + y
            out[t] = acc.sum()

    return fma


def _fma_peak(threads: int, cap_s: float) -> tuple[float, int, TimingStage | None]:
    """The best FP32 rate over FMA_WIDTHS, the width that reached it and its timing."""
    out = np.empty(threads * 4, dtype=np.float32)
    best, best_width, best_stage = 0.0, FMA_WIDTHS[0], None
    for width in FMA_WIDTHS:
        fma = _fma_kernel(width)
        # The same FLOP count for every width: fewer iterations for more chains.
        iters = 20000 * 64 // width

        def run(fma=fma, iters=iters) -> None:  # type: ignore[no-untyped-def]
            fma(out, iters, np.float32(0.999), np.float32(0.001))

        stage = timing.time_cpu(run, cap_s=cap_s / len(FMA_WIDTHS))
        rate = 2.0 * width * iters * out.shape[0] / ((stage.median_us or 0.0) * 1e-6)
        if rate > best:
            best, best_width, best_stage = rate, width, stage
    return best, best_width, best_stage


def cpu_array_elements(
    n: int, llc_bytes: int | None = None, cap_bytes: int | None = None
) -> tuple[int, bool]:
    """Doubles per CPU calibration array, and whether the cap kept it under its target.

    At least `n`, and each array alone at least LLC_MULTIPLE times the last-level cache
    (every instance together), so that the triad and the read stream from DRAM as the
    benchmark cases do (kernels.sizing); never more than KPLAY_CPU_CASE_MAX_MB per array
    unless `n` itself is more.
    """
    if llc_bytes is None:
        llc_bytes = sizing.host_llc_bytes()
    if cap_bytes is None:
        from kplay.config import EngineSettings

        cap_bytes = EngineSettings().cpu_case_max_bytes
    want = max(n, -(-sizing.LLC_MULTIPLE * llc_bytes // 8))
    most = max(n, cap_bytes // 8)
    return min(want, most), want > most


def cpu_memory_level(array_bytes: int, llc_bytes: int) -> str:
    """Where a CPU bandwidth measured over arrays of `array_bytes` came from, in words."""
    if array_bytes >= sizing.LLC_MULTIPLE * llc_bytes:
        return "DRAM"
    return (
        f"DRAM, partly the last-level cache (arrays of {array_bytes / 2**20:.0f} MiB, "
        f"{array_bytes / llc_bytes:.1f}x the cache)"
    )


def calibrate_cpu(n: int = 1 << 25, cap_s: float = 1.5) -> Ceilings:
    """The CPU's ceilings; the arrays grow past `n` doubles where the cache asks for it."""
    import numba

    llc = sizing.host_llc_bytes()
    n, _ = cpu_array_elements(n, llc)
    triad, read, _ = _cpu_kernels()
    threads = numba.get_num_threads()
    rng = np.random.default_rng(0)
    a = np.empty(n, dtype=np.float64)
    b = rng.random(n)
    c = rng.random(n)
    t_triad = timing.time_cpu(lambda: triad(a, b, c, 3.0), cap_s=cap_s)
    t_read = timing.time_cpu(lambda: read(b), cap_s=cap_s)
    fma_rate, width, fma_stage = _fma_peak(threads, cap_s)
    stages = [t_triad, t_read] + ([fma_stage] if fma_stage else [])
    return Ceilings(
        device=hardware.cpu().model,
        kind="cpu",
        source="calibrated",
        # The best rep, not the median: on a shared machine the median measures the
        # neighbours, and a ceiling is what the machine showed it can do.
        copy_bytes_per_s=3 * 8 * n / _seconds(t_triad.min_us),
        read_bytes_per_s=8 * n / _seconds(t_read.min_us),
        fp32_flops_per_s=fma_rate,
        measured_at=_now(),
        notes=f"Numba, {threads} thread(s): triad a=b+s*c over {n} doubles "
        f"({8 * n / 2**20:.0f} MiB an array, {8 * n / llc:.1f}x the "
        f"{llc / 2**20:.0f} MiB last-level cache); read: a parallel sum; FP32: {width} "
        f"independent FMA chains per thread (the best of {', '.join(map(str, FMA_WIDTHS))})",
        spread=_spread(*stages),
        memory_level=cpu_memory_level(8 * n, llc),
        memory_buffer_bytes=8 * n,
        llc_bytes=llc,
    )


# Doubles per array of the calibration made on first need, before the cache asks for more.
AUTO_CPU_ELEMENTS = 1 << 24


def measured_like_the_cases(ceilings: Ceilings, llc_bytes: int | None = None) -> bool:
    """Whether cached CPU ceilings were measured over arrays as large as a calibration here
    would use now (so at the memory level the benchmark cases live in): not those of an
    older calibration that did not record its arrays, nor of a host with a smaller cache."""
    if ceilings.memory_buffer_bytes is None:
        return False
    n, _ = cpu_array_elements(AUTO_CPU_ELEMENTS, llc_bytes)
    return ceilings.memory_buffer_bytes >= 8 * n


def cpu_ceilings() -> Ceilings | None:
    """Cached CPU ceilings, measured once on first need (a few seconds), and again where the
    cached ones were measured over arrays smaller than this host's cache asks for."""
    from kplay.config import EngineSettings

    cached = roofline.load_calibrated(hardware.cpu().model)
    if cached is not None and (
        measured_like_the_cases(cached) or EngineSettings().no_auto_calibrate
    ):
        return cached
    if EngineSettings().no_auto_calibrate:
        return None
    ceilings = calibrate_cpu(n=AUTO_CPU_ELEMENTS, cap_s=0.8)
    roofline.save_ceilings(ceilings)
    return ceilings


# A run that beats cached CPU ceilings measured longer ago than this has them measured again.
REMEASURE_AFTER_S = 600.0
_MEASURED = ("copy_bytes_per_s", "read_bytes_per_s", "fp32_flops_per_s", "fp64_flops_per_s")


def remeasured_cpu(old: Ceilings) -> Ceilings | None:
    """CPU ceilings measured again because a run beat `old`, or None where `old` is not a
    calibration of this CPU or is younger than REMEASURE_AFTER_S.

    A calibration made while the machine was busy reads low, and every honest run judged
    against it afterwards would look impossible. Each figure keeps the higher of the two
    measurements (a busy machine only ever measures low), so a kernel that really skips its
    work still exceeds the new ceilings, and measuring again costs it a few seconds at most
    once per REMEASURE_AFTER_S.
    """
    from kplay.config import EngineSettings

    if old.kind != "cpu" or old.source != "calibrated" or old.device != hardware.cpu().model:
        return None
    if EngineSettings().no_auto_calibrate:
        return None
    try:
        age = (
            dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(old.measured_at or "")
        ).total_seconds()
    except ValueError:
        age = REMEASURE_AFTER_S
    if age < REMEASURE_AFTER_S:
        return None
    fresh = calibrate_cpu(n=AUTO_CPU_ELEMENTS, cap_s=0.8)
    higher = {}
    for field in _MEASURED:
        values = [v for v in (getattr(old, field), getattr(fresh, field)) if v is not None]
        if values:
            higher[field] = max(values)
    merged = fresh.model_copy(update=higher)
    roofline.save_ceilings(merged)
    return merged


def calibrate(kind: str = "auto") -> list[Ceilings]:
    results = []
    if kind in ("auto", "gpu") and hardware.has_cuda_gpu():
        gpu = calibrate_gpu()
        roofline.save_ceilings(gpu)
        results.append(gpu)
    if kind in ("auto", "cpu"):
        cpu = calibrate_cpu()
        roofline.save_ceilings(cpu)
        results.append(cpu)
    return results


def main(argv: list[str]) -> int:
    """`python -m kplay.kernels.calibrate gpu|cpu`: measure, cache, print the JSON."""
    if len(argv) != 1 or argv[0] not in ("gpu", "cpu"):
        print("usage: python -m kplay.kernels.calibrate gpu|cpu", file=sys.stderr)
        return 2
    measured = calibrate_gpu() if argv[0] == "gpu" else calibrate_cpu()
    roofline.save_ceilings(measured)
    print(measured.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
