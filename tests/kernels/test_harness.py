"""The parts of the timing harness one at a time: the too-fast decision, the input sets,
the per-repetition check, the seeds, and the catalog's cheating folders."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kplay.kernels import cpucaches, hardware, plausibility, repcheck, rotation, timing
from kplay.kernels.arrays import ArrayOps, bits_dtype, poison_bits
from kplay.kernels.backends.base import ArrayKind
from kplay.kernels.catalog import PROBLEMS_DIR, ProblemLoadError, get_problem, load_problem
from kplay.kernels.models import Ceilings, RunJob, TimingStage
from kplay.kernels.problem import Case, Tolerance
from kplay.kernels.seeds import RECHECK_SEED_OFFSET, RunSeeds

T = 1e12


def _ceilings(source: str = "calibrated", spread: float | None = 0.05) -> Ceilings:
    return Ceilings(
        device="GPU X",
        kind="gpu",
        source=source,  # type: ignore[arg-type]
        copy_bytes_per_s=3.0 * T,
        read_bytes_per_s=3.2 * T,
        fp32_flops_per_s=60 * T,
        fp16_tc_flops_per_s=800 * T,
        spread=spread,
    )


# ---------------------------------------------------------------- too fast


def test_a_gemm_beyond_the_fp32_roof_is_too_fast_and_says_by_how_much() -> None:
    flops = 2.0 * 4096**3  # 137 GFLOP: 2.29 ms at 60 TFLOP/s
    nbytes = 3 * 4 * 4096**2
    assert plausibility.too_fast(flops, nbytes, 2300.0, _ceilings()) is None
    reason = plausibility.too_fast(flops, nbytes, 180.0, _ceilings())
    assert reason == (
        "timed at 180 µs, which would need 764 TFLOP/s of FP32 arithmetic; "
        "this device's measured FP32 ceiling is 60 TFLOP/s"
    )
    # Judged against the problem's own unit: the same time is fine for an FP16 GEMM.
    assert plausibility.too_fast(flops, nbytes, 180.0, _ceilings(), "fp16_tc") is None


def test_the_allowance_is_the_spread_plus_the_margin_and_nothing_more() -> None:
    flops = 60 * T * 1e-3  # exactly 1 ms at the ceiling
    ceilings = _ceilings(spread=0.05)  # allowed: 1 + 0.05 + 0.10 = 1.15
    assert plausibility.too_fast(flops, 1.0, 1000.0 / 1.14, ceilings, extra=0.10) is None
    assert plausibility.too_fast(flops, 1.0, 1000.0 / 1.16, ceilings, extra=0.10) is not None
    # Datasheet figures are the hardware's peak: no spread is added to them.
    datasheet = _ceilings("datasheet", spread=0.5)
    assert plausibility.too_fast(flops, 1.0, 1000.0 / 1.12, datasheet, extra=0.10) is not None
    # A calibration that noisy counts as 100% at most.
    noisy = _ceilings(spread=7.0)
    assert plausibility.too_fast(flops, 1.0, 1000.0 / 2.2, noisy, extra=0.10) is not None
    assert plausibility.allowance(noisy, 0.1) == pytest.approx(2.1)


def test_bytes_count_only_beyond_what_the_caches_hold() -> None:
    nbytes = 192 * 2**20  # a 16M-element vector add; at 3.2 TB/s: 62.9 µs
    ceilings = _ceilings()
    assert plausibility.too_fast(1.0, nbytes, 70.0, ceilings) is None
    reason = plausibility.too_fast(1.0, nbytes, 20.0, ceilings)
    assert reason is not None and "of memory bandwidth" in reason
    assert reason.endswith("this device's measured bandwidth ceiling is 3.2 TB/s")
    # All of it fits in the caches: no bandwidth can be said too high.
    assert plausibility.too_fast(1.0, nbytes, 20.0, ceilings, cache_bytes=nbytes) is None
    partly = plausibility.too_fast(1.0, nbytes, 20.0, ceilings, cache_bytes=60 * 2**20)
    assert partly is not None and "more than its caches hold" in partly


def test_the_cpu_caches_are_counted_once_each(tmp_path: Path, monkeypatch) -> None:
    def cache(cpu: int, index: int, level: int, kind: str, size: str, shared: str) -> None:
        folder = tmp_path / f"cpu{cpu}" / "cache" / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (folder / name).write_text(f"{value}\n")
        (folder / "shared_cpu_list").write_text(f"{shared}\n")

    for cpu in (0, 1):
        cache(cpu, 0, 1, "Data", "32K", str(cpu))
        cache(cpu, 1, 1, "Instruction", "32K", str(cpu))
        cache(cpu, 2, 2, "Unified", "1024K", str(cpu))
        cache(cpu, 3, 3, "Unified", "32M", "0-1")
    monkeypatch.setattr(cpucaches, "SYS_CPU", tmp_path)
    hardware.forget()
    try:
        assert plausibility.cpu_cache_bytes() == 2 * (32 + 1024) * 2**10 + 32 * 2**20
    finally:
        hardware.forget()


# ---------------------------------------------------------------- input sets


def test_memory_decides_how_many_sets_and_buffers() -> None:
    mib = 2**20
    assert rotation.plan(100 * mib, 1024 * mib) == (4, 2)
    assert rotation.plan(300 * mib, 1024 * mib) == (3, 2)
    assert rotation.plan(600 * mib, 1024 * mib) == (2, 1)
    assert rotation.plan(3000 * mib, 1024 * mib) == (2, 1)


def _rotation(n: int, launch: Any, budget: int = 2**30) -> rotation.Rotation:
    problem = get_problem("saxpy")
    case = Case(name="small", params={"n": n})
    seeds = RunSeeds(base=99, public=True)
    return rotation.Rotation(problem, case, ArrayOps(ArrayKind.numpy), launch, seeds, budget)


def test_input_sets_differ_from_the_first_in_scattered_elements_only() -> None:
    rot = _rotation(64_000, lambda args: None)
    base = rot.sets[0]
    assert len(rot.sets) == 4
    for s in rot.sets[1:]:
        for name in ("x", "y"):
            changed = np.flatnonzero(s.host[name] != base.host[name])
            assert 0 < changed.size <= 64_000 // rotation.PATCH_DIVISOR
            assert set(changed) <= set(s.positions[name].tolist())
        ref = get_problem("saxpy").reference.reference(dict(s.host), {"n": 64_000})
        np.testing.assert_array_equal(ref["out"], s.expected["out"])
        # Odd sets keep the first set's scalars, even ones draw their own.
        assert (s.host["alpha"] == base.host["alpha"]) == (s.index % 2 == 1)


@pytest.mark.parametrize(
    ("slug", "params"),
    [("vector_add", {"n": 50_000}), ("cpu_triad", {"n": 50_000}),
     ("cpu_fma_peak", {"n": 4096, "iters": 20}), ("sum", {"n": 50_000})],
)  # fmt: skip
def test_changed_sets_of_an_elementwise_problem_are_worked_out_where_they_changed(
    slug: str, params: dict, monkeypatch
) -> None:
    """An elementwise problem's set that keeps set 0's scalars is drawn and referenced at
    its changed elements only, and comes out as if drawn and referenced in full."""
    problem = get_problem(slug)
    full_draws: list[int] = []
    real = rotation.generate_inputs

    def counting(*args: Any, **kwargs: Any) -> Any:
        full_draws.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(rotation, "generate_inputs", counting)
    seeds = RunSeeds(base=7, public=False)
    rot = rotation.Rotation(
        problem, Case(name="c", params=params), ArrayOps(ArrayKind.numpy),
        lambda args: None, seeds, 2**30,
    )  # fmt: skip
    has_scalars = any(not a.is_array for a in problem.inputs)
    sparse = [s for s in rot.sets[1:] if problem.elementwise and (s.index % 2 or not has_scalars)]
    assert problem.elementwise == (slug != "sum")
    assert len(full_draws) == len(rot.sets) - len(sparse)  # set 0, and every other set
    for s in rot.sets[1:]:
        ref = problem.reference.reference(dict(s.host), dict(params))
        for name, value in ref.items():
            np.testing.assert_array_equal(value, s.expected[name])
        arrays = [a.name for a in problem.inputs if a.is_array]
        changed = [np.flatnonzero(s.host[n] != rot.sets[0].host[n]) for n in arrays]
        assert all(0 < c.size <= params["n"] // rotation.PATCH_DIVISOR for c in changed)


def _saxpy(wrong_on: int | None = None) -> Any:
    calls = {"n": 0}

    def launch(args: list[Any]) -> None:
        calls["n"] += 1
        alpha, x, y, out = args[0], args[1], args[2], args[3]
        time.sleep(0.002)  # dearer than a check: every repetition gets checked
        if calls["n"] == wrong_on:
            out[:] = x
            return
        out[:] = (np.float64(alpha) * x.astype(np.float64) + y).astype(np.float32)

    return launch


def test_a_single_wrong_repetition_is_found_and_named() -> None:
    rot = _rotation(20_000, _saxpy(wrong_on=7))  # 2 warm-ups, then timed rep 5
    with pytest.raises(rotation.RepetitionFailed) as failed:
        timing.time_cpu(rot.launch, rot.before_rep, cap_s=0.5, after_rep=rot.after_rep)
    check = failed.value.check
    assert check.name == "small (timed repetition 5)" and not check.ok
    assert check.message.startswith("the output of timed repetition 5 (input set ")
    assert check.output == "out" and check.mismatches > 0


def test_an_honest_kernel_passes_every_check_and_the_stage_says_what_was_done() -> None:
    rot = _rotation(20_000, _saxpy())
    stage = timing.time_cpu(rot.launch, rot.before_rep, cap_s=0.2, after_rep=rot.after_rep)
    rot.describe(stage)
    assert rot.failure() is None
    assert stage.input_sets == 4 and stage.buffer_sets == 2
    assert stage.checked_reps == stage.reps + 2 and stage.checked_policy == "every repetition"


def test_the_cpu_checks_a_share_of_repetitions_when_checking_costs_more() -> None:
    rot = _rotation(1000, lambda args: None)
    rot.launches, rot.kernel_us, rot.check_us = 10, 10.0, 100.0
    assert rot.check_share() == rotation.MIN_CHECK_SHARE
    rot.kernel_us = 500.0
    assert rot.check_share() == pytest.approx(0.5)
    rot.kernel_us = 5000.0
    assert rot.check_share() == 1.0


class _StandInGpu(ArrayOps):
    """NumPy arrays taken for device ones: runs the GPU branch of the rotation here."""

    on_gpu = True  # type: ignore[assignment]

    def as_cupy(self, dev: Any) -> Any:
        return dev


class _Packed:
    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


def test_the_gpu_branch_counts_every_repetition_and_names_the_first_wrong_one(monkeypatch):
    import sys
    import types

    def count(got: Any, expected: Any, tol: Tolerance) -> _Packed:
        bad, unwritten, _ = repcheck.count_on_host(np.asarray(got), np.asarray(expected), tol)
        return _Packed(np.int64(bad | (unwritten << 32)))

    stand_in = types.SimpleNamespace(
        asarray=np.asarray, stack=lambda parts: _Packed(np.stack([p.value for p in parts]))
    )
    monkeypatch.setitem(sys.modules, "cupy", stand_in)
    monkeypatch.setattr(repcheck, "count_on_device", count)
    problem = get_problem("saxpy")
    seeds = RunSeeds(base=5, public=True)
    launch = _saxpy(wrong_on=9)
    rot = rotation.Rotation(
        problem, Case(name="small", params={"n": 5000}), _StandInGpu(ArrayKind.numpy),
        launch, seeds, 2**30,
    )  # fmt: skip
    for i in range(12):
        rot.before_rep()
        rot.launch()
        rot.after_rep(i >= 3, None)  # three warm-ups, as on the GPU
    stage = TimingStage(timed=True)
    rot.describe(stage)
    assert stage.checked_reps == 12 and stage.checked_policy == "every repetition, on the device"
    failed = rot.failure()
    assert failed is not None and failed.name == "small (timed repetition 6)"
    assert failed.message.startswith("the output of timed repetition 6 (input set ")
    assert "out: " in failed.message and "elements outside the tolerance" in failed.message


# ---------------------------------------------------------------- the check of one output


def test_the_repetition_check_counts_wrong_and_unwritten_elements() -> None:
    tol = Tolerance(atol=1e-6, rtol=1e-6)
    expected = np.arange(1, 101, dtype=np.float32)
    got = expected.copy()
    assert repcheck.count_on_host(got, expected, tol) == (0, 0, -1)
    got[10] += 1
    got.view(np.int32)[20:23] = poison_bits(np.float32)  # the poison, bit for bit
    assert repcheck.count_on_host(got, expected, tol) == (4, 3, 10)
    got[30] = np.nan  # a NaN the kernel wrote: wrong, but not unwritten
    assert repcheck.count_on_host(got, expected, tol) == (5, 3, 10)
    ints = np.arange(10, dtype=np.int32)
    stale = ints.copy()
    stale[4] = -0x2BADBEEF  # the integer poison
    assert repcheck.count_on_host(stale, ints, Tolerance(atol=0, rtol=0)) == (1, 1, 4)
    assert repcheck.decode((3 << 32) | 4) == (4, 3)


@pytest.mark.gpu
def test_the_device_check_agrees_with_the_host_one() -> None:
    import cupy

    tol = Tolerance(atol=1e-6, rtol=1e-6)
    expected = np.linspace(-5, 5, 3000, dtype=np.float32).reshape(30, 100)
    for dtype in (np.float32, np.float16, np.float64, np.int32):
        exp = expected.astype(dtype)
        got = exp.copy()
        got[3, 7] = got[3, 7] + 50
        got.view(bits_dtype(dtype))[9, 1] = poison_bits(dtype)  # never written
        # A written NaN: wrong, not unwritten (float16 is widened on the device, where a
        # NaN's bits may not survive: there only the poison itself is asked about).
        written_nan = dtype in (np.float32, np.float64)
        if written_nan:
            got[0, 0] = np.nan
        packed = repcheck.count_on_device(cupy.asarray(got), cupy.asarray(exp), tol)
        on_host = repcheck.count_on_host(got, exp, tol)
        wrong = 3 if written_nan else 2
        assert repcheck.decode(int(packed.get())) == on_host[:2] == (wrong, 1), dtype


# ---------------------------------------------------------------- seeds


def test_seeds_public_and_secret() -> None:
    case = Case(name="c", params={"n": 1}, seed=11)
    job = RunJob(problem="p", backend="b", source="s", seed=3)
    public = RunSeeds.for_job(job.model_copy(update={"public_seeds": True}))
    assert public.case(case) == 14 and public.shown(case) == 14 and public.memoise
    assert public.recheck(case) == 14 + RECHECK_SEED_OFFSET
    a, b = RunSeeds.for_job(job), RunSeeds.for_job(job)
    assert a.base != b.base and a.shown(case) is None and not a.memoise
    derived = {a.derived(case, "variant", k) for k in range(4)} | {a.derived(case, "schedule")}
    assert len(derived) == 5 and all(0 <= d < 2**63 for d in derived)
    assert a.derived(case, "variant", 1) == a.derived(case, "variant", 1)


# ---------------------------------------------------------------- the catalog


def test_a_cheating_kernel_must_declare_its_verdict(tmp_path: Path) -> None:
    folder = tmp_path / "vector_add"
    shutil.copytree(PROBLEMS_DIR / "vector_add", folder)
    assert load_problem(folder).solutions("cheating")
    cheat = folder / "solutions" / "cheating" / "returns_early_on_repeated_inputs.numba_cpu.py"
    cheat.write_text(cheat.read_text().replace("kplay-expect: wrong", "kplay-expect: fine"))
    with pytest.raises(ProblemLoadError, match="declares the verdict it must get"):
        load_problem(folder)
    cheat.write_text("import numba\n")
    with pytest.raises(ProblemLoadError, match="found None"):
        load_problem(folder)
