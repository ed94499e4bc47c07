"""Profile jobs: the learner's full run again under Nsight Compute, one at a time per GPU.

A run whose mode is "profile" is not evaluated by the warm pool. The worker writes the job
to a folder of its own, and starts `ncu` on `kplay.workers.profilebox` in a new sandbox
that shows only that folder read-write; ncu follows the run into the evaluation child
and profiles the one launch the timing harness marks (`perf.BENCHMARK_RANGE`). After
the box has ended, the worker reads the report (`ncurun.read_report`) outside it.

A profile is advice about the learner's own kernel, not a verdict: ncu shares its box
with learner code, which could write a report of its own. So a profile run is never
verified and carries neither a timing nor a roofline point (ncu's replays and its
interception slow the run); it carries the check's outcome, the compile stage and the
profile. Profiles take turns on each GPU (a lock file per device), since ncu's replays
and clock readings would disturb any other profile on it, and have their own time limit
(`KPLAY_PROFILE_TIMEOUT_S`).
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.kernels.ncurun import (
    NO_NCU,
    ProfileError,
    find_ncu,
    no_report,
    profile_argv,
    profile_stage,
    read_report,
)
from kplay.workers.limits import Limits, child_env, failure_result
from kplay.workers.sandbox import Sandbox

log = logging.getLogger(__name__)

# A report larger than this is profiled and summarised but not sent back for download.
MAX_REPORT_BYTES = 32 * 1024 * 1024


class ProfileTimeout(ProfileError):
    pass


class Profiler:
    def __init__(
        self, sandbox: Sandbox | None, limits: Limits, timeout_s: float, lock_dir: Path
    ) -> None:
        self.sandbox = sandbox
        self.limits = limits
        self.timeout_s = timeout_s
        self.lock_dir = lock_dir

    @staticmethod
    def unavailable() -> str | None:
        """Why this host cannot take profiles, or None."""
        return None if find_ncu() else NO_NCU

    def run(self, job: RunJob) -> RunResult:
        started = time.monotonic()
        ncu = find_ncu()
        if ncu is None:
            return failure_result(job, NO_NCU, RunState.rejected)
        folder = Path(tempfile.mkdtemp(prefix="kplay-profile-"))
        try:
            with gpu_turn(self.lock_dir, self.timeout_s) as waited:
                left = self.timeout_s - waited
                inner = self._take(ncu, job, folder, left)
                profile = read_report(ncu, folder / "profile.ncu-rep", left)
            stage = profile_stage(profile, job.source)
            data = (folder / "profile.ncu-rep").read_bytes()
            stage.report_bytes = len(data)
            if len(data) <= MAX_REPORT_BYTES:
                stage.report_b64 = base64.b64encode(data).decode("ascii")
            stage.seconds = round(time.monotonic() - started, 2)
        except ProfileTimeout as exc:
            return failure_result(job, f"profile: {exc}", RunState.timeout)
        except (ProfileError, OSError) as exc:
            return failure_result(job, f"profile: {exc}")
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        words = f"profiled the benchmark launch of {stage.kernel} (grid {stage.grid}, block "
        words += f"{stage.block}) in {stage.seconds:.1f} s"
        return RunResult(
            job_id=job.job_id,
            problem=job.problem,
            backend=job.backend,
            state=RunState.done,
            message=words,
            compile=inner.compile,
            check=inner.check,
            system=inner.system,
            profile=stage,
        )

    def _take(self, ncu: str, job: RunJob, folder: Path, limit_s: float) -> RunResult:
        """Run the job under ncu in its box; the inner run's result, its report on disk."""
        (folder / "job.json").write_text(job.model_copy(update={"mode": "full"}).model_dump_json())
        result_file = folder / "result.json"
        inner = [sys.executable, "-m", "kplay.workers.profilebox", str(folder / "job.json")]
        inner += [str(result_file), f"{self.timeout_s:g}"]
        argv = profile_argv(ncu, folder / "profile", inner)
        log_path = folder / "ncu.log"
        with log_path.open("wb") as out:
            code = self._start(argv, folder, out, limit_s)
        printed = log_path.read_text(errors="replace")
        inner_result = None
        if result_file.is_file():
            inner_result = RunResult.model_validate_json(result_file.read_text())
        if inner_result is not None and inner_result.state is not RunState.done:
            raise ProfileError(
                "the run under the profiler ended "
                f"{inner_result.state.value}: {inner_result.message or 'no message'}"
            )
        if not (folder / "profile.ncu-rep").is_file() or inner_result is None:
            log.warning("profile of %s: ncu exit %s: %s", job.job_id, code, printed[-2000:])
            raise ProfileError(no_report("", printed))
        return inner_result

    def _start(self, argv: list[str], folder: Path, out: object, limit_s: float) -> int | None:
        if self.sandbox is not None:
            env = self.sandbox.child_env(self.limits)
            box = self.sandbox.start(
                argv,
                env=env,
                output=out,
                cwd=folder,
                pass_fds=(),
                gpu=True,
                binds=[folder],
                readonly=ncu_install(argv[0]),
            )  # type: ignore[arg-type]
            try:
                return _wait(box.proc, limit_s, box.kill)
            finally:
                box.close()
        env = child_env(self.limits, folder, folder / "cache")
        proc = subprocess.Popen(
            argv, cwd=folder, env=env, stdout=out, stderr=out, start_new_session=True
        )  # type: ignore[call-overload]

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, 9)

        return _wait(proc, limit_s, kill)


def ncu_install(ncu: str) -> list[Path]:
    """The folders an `ncu` needs beside /usr, which every box shows: the tool's own
    installation (the toolkit's `ncu` is a launcher that looks for it next to the toolkit
    or under /opt/nvidia) and the folder the binary really lives in."""
    real = Path(os.path.realpath(ncu))
    found = [real.parent]
    toolkit = Path(ncu).resolve().parent.parent
    found += sorted(toolkit.glob("nsight-compute*"))
    found += [p for p in (Path("/opt/nvidia"),) if p.is_dir()]
    return [p for p in found if p.is_dir() and p != Path("/usr") and Path("/usr") not in p.parents]


def _wait(proc: subprocess.Popen[bytes], limit_s: float, kill: object) -> int | None:
    try:
        return proc.wait(timeout=max(limit_s, 1.0))
    except subprocess.TimeoutExpired:
        kill()  # type: ignore[operator]
        proc.wait()
        raise ProfileTimeout(f"the profile took longer than its limit of {limit_s:.0f} s") from None


@contextlib.contextmanager
def gpu_turn(lock_dir: Path, limit_s: float) -> Iterator[float]:
    """Hold this GPU's profile lock; yields the seconds spent waiting for it."""
    device = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "all"
    device = re.sub(r"[^A-Za-z0-9_.-]", "_", device)[:80]
    lock_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with (lock_dir / f"profile-gpu-{device}.lock").open("a") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - started > limit_s:
                    raise ProfileTimeout(
                        f"another profile held GPU {device} for over {limit_s:.0f} s"
                    ) from None
                time.sleep(0.2)
        try:
            yield time.monotonic() - started
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
