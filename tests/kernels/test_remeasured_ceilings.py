"""CPU ceilings measured on a busy machine read low; a run that beats them has them measured
again (at most once per REMEASURE_AFTER_S) before it is called impossible, and each figure
keeps the higher of the two measurements."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from kplay.kernels import calibrate, hardware, roofline
from kplay.kernels import evaluate as ev
from kplay.kernels.models import Ceilings, RunJob, RunState

SOURCE = Path(__file__).resolve().parents[2] / (
    "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
)


def _low(age_s: float) -> Ceilings:
    """This CPU's ceilings as a calibration under heavy load might leave them: FP32 and copy
    far too low; the read figure far too high, to see that the higher one is kept."""
    when = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_s)
    return Ceilings(
        device=hardware.cpu().model,
        kind="cpu",
        source="calibrated",
        copy_bytes_per_s=1e6,
        read_bytes_per_s=1e14,
        fp32_flops_per_s=1e3,
        spread=0.05,
        measured_at=when.isoformat(timespec="seconds"),
        memory_buffer_bytes=1 << 40,  # as large as any calibration here would use
    )


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("KPLAY_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KPLAY_NO_AUTO_CALIBRATE", raising=False)
    return tmp_path


def _run() -> RunState:
    job = RunJob(
        problem="vector_add", backend="numba-cpu", source=SOURCE.read_text(), timing_cap_s=0.05
    )
    return ev.evaluate(job).state


def test_an_old_low_calibration_is_measured_again_and_the_honest_run_passes(cache: Path) -> None:
    roofline.save_ceilings(_low(age_s=2 * calibrate.REMEASURE_AFTER_S))
    assert _run() is RunState.done
    now = roofline.load_calibrated(hardware.cpu().model)
    assert now is not None
    assert now.fp32_flops_per_s is not None and now.fp32_flops_per_s > 1e6  # measured
    assert now.copy_bytes_per_s is not None and now.copy_bytes_per_s > 1e6
    assert now.read_bytes_per_s == 1e14  # the higher of the two stays
    age = dt.datetime.now(dt.UTC) - dt.datetime.fromisoformat(now.measured_at or "")
    assert age.total_seconds() < calibrate.REMEASURE_AFTER_S


def test_a_recent_calibration_is_not_measured_again(cache: Path) -> None:
    low = _low(age_s=60)
    roofline.save_ceilings(low)
    assert _run() is RunState.suspicious
    assert roofline.load_calibrated(hardware.cpu().model) == low
    assert calibrate.remeasured_cpu(low) is None


def test_only_this_cpus_calibrations_are_measured_again(cache: Path) -> None:
    other = _low(age_s=2 * calibrate.REMEASURE_AFTER_S).model_copy(update={"device": "another"})
    assert calibrate.remeasured_cpu(other) is None
    datasheet = _low(age_s=3600).model_copy(update={"source": "datasheet"})
    assert calibrate.remeasured_cpu(datasheet) is None
