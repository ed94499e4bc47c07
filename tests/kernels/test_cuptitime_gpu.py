"""The engine's timer on the kernels' own stamps (KPLAY_GPU_TIMER=kernels), on a GPU with
cupti-python: what it reports, and where the CUDA events stand instead."""

from __future__ import annotations

import numpy as np
import pytest

from kplay.kernels import timing

pytestmark = pytest.mark.gpu

ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, unsigned int n) {
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
"""
N = 1 << 24


@pytest.fixture
def kernels_timer(monkeypatch: pytest.MonkeyPatch) -> object:
    pytest.importorskip("cupti")
    cupy = pytest.importorskip("cupy")
    monkeypatch.setenv("KPLAY_GPU_TIMER", "kernels")
    return cupy


def test_a_memory_bound_kernel_is_timed_by_its_own_stamps(kernels_timer: object) -> None:
    cupy = kernels_timer
    a, b = cupy.ones(N, cupy.float32), cupy.ones(N, cupy.float32)  # type: ignore[attr-defined]
    c = cupy.empty_like(a)  # type: ignore[attr-defined]
    add = cupy.RawKernel(ADD, "add")  # type: ignore[attr-defined]

    def launch() -> None:
        add(((N + 255) // 256,), (256,), (a, b, c, np.uint32(N)))

    stage = timing.time_gpu(launch, cap_s=1.0)
    assert stage.timer == "cupti-kernels"
    assert stage.events_median_us is not None and stage.median_us is not None
    # The events add the launch's front end and drain: a few µs, never less than nothing.
    assert 0.0 < stage.events_median_us - stage.median_us < 8.0


def test_work_outside_kernels_leaves_the_events_in_charge(kernels_timer: object) -> None:
    cupy = kernels_timer
    src = cupy.ones(64 * 2**20, cupy.float32)  # type: ignore[attr-defined]
    dst = cupy.empty_like(src)  # type: ignore[attr-defined]
    add = cupy.RawKernel(ADD, "add")  # type: ignore[attr-defined]
    runtime = cupy.cuda.runtime  # type: ignore[attr-defined]

    def launch() -> None:
        # A 256 MB device-to-device copy (no kernel record) and a tiny kernel.
        runtime.memcpy(dst.data.ptr, src.data.ptr, src.nbytes, runtime.memcpyDeviceToDevice)
        add((1,), (32,), (src, src, dst, np.uint32(32)))

    stage = timing.time_gpu(launch, cap_s=1.0)
    assert stage.timer == "cuda-events"
    assert stage.events_median_us is None
    assert stage.median_us is not None and stage.median_us > 50.0
