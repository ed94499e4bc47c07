"""One timer for every GPU backend, one for the CPU, with the same statistics.

GPU: warm-up; before every rep per-rep resets run and the L2 is flushed, all outside the
timed region: a kernel reads a buffer of at least twice the L2 from end to end, which
evicts every line the previous launch and the resets left (writing back the dirty ones
then, not during the timed launch) and leaves the L2 holding clean lines of a buffer the
kernel never touches; CUDA events bracket each launch; reps continue until the relative
standard error of the mean is <= 1% (at least 10 reps) or a time cap is reached.

The harness hooks in on both sides of every launch, warm-up included. `before_rep` runs
before the L2 flush on the GPU (so nothing it wrote waits in the L2 for the kernel) and
before the clock starts on the CPU; the evaluation re-poisons outputs and rotates inputs
there. `after_rep` runs once the end event is recorded or the clock has stopped; the
evaluation checks that repetition's output there.

With the `gpu_timer` setting at "kernels" and CUPTI installed, each repetition's time is
instead the span of the kernels its launch enqueued, from their own GPU stamps
(kernels.cuptitime), the events kept as the check that nothing but kernels ran.

Host launch overhead must stay out of the events: a Numba or Triton launch can take
longer on the host than a small kernel takes on the GPU, and the start event would then
fire while the GPU waits for the kernel to be queued. So after the flush a one-thread
kernel spins on the GPU's global timer for about twice the measured host launch time,
keeping the stream busy until the learner's kernel is queued behind the start event.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from kplay.kernels.models import ClockReading, TimingStage

# Called after each launch, outside the timed region: whether the launch was a timed one,
# and on the CPU its time in µs (None on the GPU, where times are known only later).
AfterRep = Callable[[bool, float | None], None]

MIN_REPS = 10
MAX_REPS = 5000
TARGET_RSE = 0.01
BATCH = 10


def summarize(samples_us: list[float]) -> dict[str, float | int]:
    arr = np.asarray(samples_us, dtype=np.float64)
    q1, med, q3 = np.percentile(arr, [25, 50, 75])
    mean = float(arr.mean())
    stderr = float(arr.std(ddof=1) / np.sqrt(len(arr))) if len(arr) > 1 else 0.0
    return {
        "median_us": float(med),
        "q1_us": float(q1),
        "q3_us": float(q3),
        "iqr_us": float(q3 - q1),
        "mean_us": mean,
        "stderr_us": stderr,
        "min_us": float(arr.min()),
        "reps": len(arr),
        "rel_stderr": stderr / mean if mean > 0 else 0.0,
    }


def _done(samples: list[float], started: float, cap_s: float) -> bool:
    if len(samples) < MIN_REPS:
        return False
    if len(samples) >= MAX_REPS or time.perf_counter() - started > cap_s:
        return True
    return bool(summarize(samples)["rel_stderr"] <= TARGET_RSE)


# ------------------------------------------------------------------ GPU


# A read of every 16-byte word of the buffer. The loads allocate in the L2 like any other;
# the store never happens (the buffer holds zeros) but keeps the compiler from dropping them.
_SWEEP_SRC = r"""
extern "C" __global__ void kplay_l2_sweep(const uint4* buf, unsigned long long n,
                                          unsigned int* sink) {
    unsigned int acc = 0;
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x) {
        uint4 v = buf[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9E3779B9u) sink[0] = acc;
}
"""


class _Flusher:
    """A buffer at least twice the L2, read end to end before each rep (see the docstring).

    A write of the buffer (a memset) would evict too, but it leaves the L2 full of dirty
    lines that the timed kernel then has to write back to DRAM as it evicts them: up to
    the L2's size of extra writes inside the timed region, which is what made short
    memory-bound kernels read 5-16% slower than Nsight Compute. A read leaves clean lines.
    """

    def __init__(self) -> None:
        import cupy

        dev = cupy.cuda.Device()
        l2 = int(dev.attributes.get("L2CacheSize", 50 * 2**20))
        self.nbytes = max(2 * l2, 256 * 2**20)
        # Rows of 16 bytes, one uint4 each: the kernel reads exactly the buffer's rows.
        self.words = self.nbytes // 16
        self.buf = cupy.zeros((self.words, 2), dtype=cupy.uint64)
        self.sink = cupy.zeros(1, dtype=cupy.uint32)
        self.kernel = cupy.RawKernel(_SWEEP_SRC, "kplay_l2_sweep")
        sms = int(dev.attributes.get("MultiProcessorCount", 132))
        self.grid = (sms * 4,)

    def flush(self) -> None:
        self.kernel(self.grid, (512,), (self.buf, np.uint64(self.buf.shape[0]), self.sink))


_FLUSHER: _Flusher | None = None


def _flusher() -> _Flusher:
    global _FLUSHER
    if _FLUSHER is None:
        _FLUSHER = _Flusher()
    return _FLUSHER


_DELAY_SRC = r"""
extern "C" __global__ void kplay_delay(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
"""
_DELAY_FN = None


def _delay(ns: int) -> None:
    global _DELAY_FN
    import cupy

    if _DELAY_FN is None:
        _DELAY_FN = cupy.RawKernel(_DELAY_SRC, "kplay_delay")
    _DELAY_FN((1,), (1,), (np.uint64(ns),))


def gpu_clocks() -> ClockReading | None:
    """SM and memory clocks, temperature and power of the current device (kernels.hardware)."""
    from kplay.kernels import hardware

    try:
        return hardware.read_clocks(hardware.current_gpu().index)
    except hardware.NoGpu:  # clocks are informative; never fail a run over them
        return None


def _nvtx_push(name: str) -> bool:
    try:
        from cupy.cuda import nvtx

        nvtx.RangePush(name)
    except (ImportError, AttributeError, RuntimeError):
        return False
    return True


def _nvtx_pop() -> None:
    from cupy.cuda import nvtx

    nvtx.RangePop()


def time_gpu(
    launch: Callable[[], None],
    before_rep: Callable[[], None] | None = None,
    cap_s: float = 2.0,
    flush_l2: bool = True,
    warmup: int = 3,
    after_rep: AfterRep | None = None,
    mark: str | None = None,
) -> TimingStage:
    """`mark`: an NVTX range of that name around the last warm-up launch, which a profiler
    can select (`ncu --nvtx --nvtx-include NAME/`); it costs nothing without one."""
    # Recording starts before the warm-up, so that the host time it adds to a launch is in
    # the warm-up's measure of it (the delay below).
    stamps = _kernel_stamps()
    try:
        return _time_gpu(launch, before_rep, cap_s, flush_l2, warmup, after_rep, mark, stamps)
    finally:
        if stamps:
            stamps.close()


def _time_gpu(  # noqa: PLR0913 - time_gpu's parameters and the recorder
    launch: Callable[[], None],
    before_rep: Callable[[], None] | None,
    cap_s: float,
    flush_l2: bool,
    warmup: int,
    after_rep: AfterRep | None,
    mark: str | None,
    stamps: Any,
) -> TimingStage:
    import cupy

    host_us: list[float] = []
    rounds = max(warmup, 3)
    for i in range(rounds):
        if before_rep:
            before_rep()
        marked = mark is not None and i == rounds - 1 and _nvtx_push(mark)
        t0 = time.perf_counter()
        launch()
        host_us.append((time.perf_counter() - t0) * 1e6)
        if marked:
            _nvtx_pop()
        if after_rep:
            after_rep(False, None)
        cupy.cuda.Device().synchronize()
    # Twice the slowest host enqueue seen after the first (compiling) launch, at least 20 µs.
    delay_ns = int(min(5e6, max(20e3, 2e3 * max(host_us[1:]))))
    clocks_before = gpu_clocks()
    flusher = _flusher() if flush_l2 else None
    samples: list[float] = []
    kernels: list[float] = []  # with stamps: each repetition's kernels' span
    rep = 0
    started = time.perf_counter()
    while not _done(samples, started, cap_s):
        events = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(BATCH)]
        for start, end in events:
            # Resets first, then the flush: what they wrote must not wait in the L2.
            if before_rep:
                before_rep()
            if flusher:
                flusher.flush()
            _delay(delay_ns)
            # The repetition's id is pushed outside the events, so that they time what
            # they always did; the event records themselves launch no kernel.
            if stamps:
                stamps.push(rep)
            start.record()
            launch()
            end.record()
            if stamps:
                stamps.pop()
            rep += 1
            if after_rep:
                after_rep(True, None)
        events[-1][1].synchronize()
        samples.extend(cupy.cuda.get_elapsed_time(s, e) * 1000.0 for s, e in events)
    by_kernels = False
    if stamps:
        from kplay.kernels.cuptitime import consistent

        spans = stamps.spans()
        kernels = [spans[i] for i in range(rep) if i in spans]
        by_kernels = consistent(samples, kernels)
    stats = summarize(kernels if by_kernels else samples)
    return TimingStage(
        timed=True,
        l2_flushed=flush_l2,
        clocks_before=clocks_before,
        clocks_after=gpu_clocks(),
        timer="cupti-kernels" if by_kernels else "cuda-events",
        events_median_us=float(np.median(samples)) if by_kernels else None,
        **stats,  # type: ignore[arg-type]
    )


def _kernel_stamps():  # type: ignore[no-untyped-def]
    """CUPTI's kernel stamps where the engine is set to time by them and CUPTI can start."""
    from kplay.config import EngineSettings

    # Unset (the default, events): no settings object on every timed stage (0.5 ms each).
    if not os.environ.get(EngineSettings.env_name("gpu_timer")):
        return None
    if EngineSettings().gpu_timer != "kernels":
        return None
    from kplay.kernels.cuptitime import KernelStamps

    return KernelStamps.open()


# ------------------------------------------------------------------ CPU


def time_cpu(
    launch: Callable[[], None],
    before_rep: Callable[[], None] | None = None,
    cap_s: float = 2.0,
    warmup: int = 2,
    threads: int | None = None,
    after_rep: AfterRep | None = None,
) -> TimingStage:
    for _ in range(warmup):
        if before_rep:
            before_rep()
        t0 = time.perf_counter_ns()
        launch()
        if after_rep:
            after_rep(False, (time.perf_counter_ns() - t0) / 1000.0)
    samples: list[float] = []
    started = time.perf_counter()
    while not _done(samples, started, cap_s):
        if before_rep:
            before_rep()
        t0 = time.perf_counter_ns()
        launch()
        samples.append((time.perf_counter_ns() - t0) / 1000.0)
        if after_rep:
            after_rep(True, samples[-1])
    return TimingStage(
        timed=True,
        l2_flushed=False,
        threads=threads,
        timer="perf_counter_ns",
        **summarize(samples),  # type: ignore[arg-type]
    )
