"""The adversarial suite: every case of tests/adversarial/cases/ through the real engine, in
sandboxed evaluation children, with the verdict and the evidence its header declares.

All selected cases run at the first test that needs a verdict: two at a time in one pool,
and those that try to leave something for the next job one by one in a pool of their own,
each followed in the same child by tests/adversarial/next_job.numba_cpu.py. Secrets are
planted in this process's environment and in a home-folder file first: no case may print
them. GPU cases without an `expect-simulated` line need a GPU (`gpu` marker); the others
also run in Numba's simulator, Triton's interpreter, or compile-only. docs/security.md
has the table of every case.
"""

from __future__ import annotations

import functools
import os
import re
import secrets
import shutil
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kplay.kernels.backends.base import Capability, get_backend
from kplay.kernels.hardware import has_cuda_gpu
from kplay.kernels.models import RunJob, RunResult, RunState
from kplay.workers.limits import MIB, Limits
from kplay.workers.runner import WorkerPool
from kplay.workers.sandbox import SandboxConfig, SandboxUnavailable, prepare
from tests.adversarial.cases_index import CLASSES, Case, all_cases
from tests.conftest import skip_or_fail

pytestmark = [pytest.mark.sandbox, pytest.mark.last]  # `within` bounds: few tests beside it

REPO = Path(__file__).resolve().parents[2]
NEXT_JOB = (Path(__file__).parent / "next_job.numba_cpu.py").read_text()
GPU_BACKENDS = ("cuda", "numba-cuda", "triton")
ENGINE = "kplay.kernels.evaluate:evaluate"

# Wide enough for a first Triton job on two busy cores, also one that fills its /tmp. Host memory:
# small where nothing but the CPU runs; a timed GPU run keeps its input sets and
# references on the host (about 1 GiB for vector_add's 16M elements), so the default there.
LIMITS = Limits(
    wall_timeout_s=45.0,
    cpu_seconds=40,
    memory_bytes=(4096 if has_cuda_gpu() else 1536) * MIB,
    output_bytes=1 * MIB,
    output_tail_bytes=16 * 1024,
    start_timeout_s=120.0,
    jobs_per_child=200,
)
# Cases that fail today, with the reason; strict: they must start passing when it goes.
XFAIL: dict[str, str] = {}

CASES = all_cases()


# ---------------------------------------------------------------- which cases run here


def _capability(backend: str) -> Capability:
    return get_backend(backend).capability()


def expected(case: Case) -> tuple[str, ...] | None:
    """The verdicts allowed here, or None where the case cannot run here."""
    capability = _capability(case.backend)
    if capability is Capability.run:
        return case.expect
    if capability in (Capability.simulate, Capability.compile_only):
        return case.expect_simulated
    return None


def _param(case: Case) -> Any:
    marks: list[Any] = []
    if case.backend in GPU_BACKENDS and case.expect_simulated is None:
        marks.append(pytest.mark.gpu)
    if case.name in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[case.name]))
    if "process-limit" in case.requires:
        marks.append(pytest.mark.host_limits)
    return pytest.param(case, id=case.name, marks=marks)


# ---------------------------------------------------------------- planted secrets


@dataclass
class Secrets:
    """Values no case may ever print: in this process's environment and in a home file."""

    values: dict[str, str] = field(default_factory=dict)
    folder: Path | None = None

    def plant(self) -> None:
        token = secrets.token_hex(16)
        self.values = {
            "KPLAY_RESULT_KEY": f"result-key-{token}",
            "KPLAY_SECRET_KEY": f"session-key-{token}",
            "KPLAY_DATABASE_URL": f"postgresql+psycopg://kplay:pw-{token}@127.0.0.1/kplay",
            "AWS_SECRET_ACCESS_KEY": f"aws-{token}",
        }
        self._saved = {name: os.environ.get(name) for name in self.values}
        os.environ.update(self.values)
        self.folder = Path.home() / f".kplay-adversarial-{token[:8]}"
        self.folder.mkdir(mode=0o700)
        file_secret = f"file-secret-{token}"
        (self.folder / "canary").write_text(file_secret)
        self.values["home file"] = file_secret

    def remove(self) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)


# ---------------------------------------------------------------- running the cases


@dataclass
class Outcome:
    result: RunResult
    seconds: float
    after: RunResult | None = None  # the next job in the same child, where asked for


def _job(case: Case) -> RunJob:
    return RunJob(
        problem=case.problem,
        backend=case.backend,
        source=case.source,
        mode=case.mode,
        timing_cap_s=0.1,
    )


def _host_paths(case: Case) -> list[Path]:
    return [Path(p.replace("$REPO", str(REPO))).expanduser() for p in case.needs("absent")]


def _config() -> SandboxConfig:
    if shutil.which("bwrap") is None and SandboxConfig.from_settings().bwrap is None:
        skip_or_fail("bubblewrap (bwrap) is not installed")
    # The settings' bubblewrap, nothing less than the sandbox, and no folder of this test
    # session shared with the children (the other sandbox tests share one).
    return SandboxConfig.from_settings().model_copy(
        update={"mode": "required", "shared_dirs": (), "max_tasks": 512, "tmp_bytes": 256 * MIB}
    )


def _pool(size: int, spares: int = 0, **limits: Any) -> WorkerPool:
    try:
        return WorkerPool(
            size, LIMITS.model_copy(update=limits), ENGINE, sandbox=_config(), spares=spares
        )
    except SandboxUnavailable as exc:
        skip_or_fail(str(exc))
        raise


@functools.cache
def process_limit_holds() -> bool:
    """Whether something bounds a box's processes here: RLIMIT_NPROC, or a cgroup."""
    if os.geteuid() != 0:
        return True
    sandbox, status = prepare(_config())  # root: the kernel exempts it from RLIMIT_NPROC
    if sandbox is not None:
        sandbox.close()
    return status.cgroup is not None


NO_PROCESS_LIMIT = "a root worker without a delegated cgroup: nothing bounds a box's processes"


def runs_here(case: Case) -> bool:
    limited = "process-limit" not in case.requires or process_limit_holds()
    return expected(case) is not None and limited


class Suite:
    """Runs every selected case once, all at once, and keeps what happened."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = cases
        self.outcomes: dict[str, Future[Outcome]] = {}
        self.planted = Secrets()
        self._threads = ThreadPoolExecutor(max_workers=3)

    def start(self) -> None:
        for case in self.cases:
            for path in _host_paths(case):
                path.unlink(missing_ok=True)
        self.planted.plant()
        alone = [c for c in self.cases if c.needs("next-job")]
        together = [c for c in self.cases if not c.needs("next-job")]
        self.shared = _pool(2)
        # One child per case and its next job: two jobs, then a fresh child (the spare).
        self.pairs = _pool(1, spares=1, jobs_per_child=2) if alone else None
        lock = threading.Lock()
        queue = iter(sorted(together, key=_slowest_first))

        def drain() -> None:
            while True:
                with lock:
                    case = next(queue, None)
                if case is None:
                    return
                self._run(self.shared, case)

        def pairs() -> None:
            for case in alone:
                self._run(self.pairs, case, then_next=True)

        for case in self.cases:
            self.outcomes[case.name] = Future()
        self.workers = [self._threads.submit(drain), self._threads.submit(drain)]
        if alone:
            self.workers.append(self._threads.submit(pairs))

    def _run(self, pool: WorkerPool | None, case: Case, then_next: bool = False) -> None:
        future = self.outcomes[case.name]
        try:
            assert pool is not None
            started = time.monotonic()
            result = pool.run(_job(case))
            outcome = Outcome(result, time.monotonic() - started)
            if then_next:
                outcome.after = pool.run(
                    RunJob(problem="vector_add", backend="numba-cpu", source=NEXT_JOB, mode="check")
                )
            future.set_result(outcome)
        except BaseException as exc:  # noqa: BLE001 - the case's test reports it
            future.set_exception(exc)

    def outcome(self, case: Case) -> Outcome:
        return self.outcomes[case.name].result(timeout=900)

    def close(self) -> None:
        for worker in getattr(self, "workers", []):
            worker.result(timeout=900)
        self._threads.shutdown()
        for pool in (getattr(self, "shared", None), getattr(self, "pairs", None)):
            if pool is not None:
                pool.close()
        self.planted.remove()


def _slowest_first(case: Case) -> tuple[int, str]:
    # The runs that take long start first, so that the two children finish together.
    slow = "timeout" in (expected(case) or ()) or case.backend == "triton" or case.mode == "full"
    return (0 if slow else 1, case.name)


@pytest.fixture(scope="module")
def suite(request: pytest.FixtureRequest) -> Iterator[Suite]:
    selected = {
        item.callspec.params["case"].name
        for item in request.session.items
        if getattr(item, "callspec", None) is not None
        and isinstance(item.callspec.params.get("case"), Case)
        and not item.get_closest_marker("skip")
    }
    runnable = [c for c in CASES if c.name in selected and runs_here(c)]
    suite = Suite(runnable)
    try:
        suite.start()
        yield suite
    finally:
        suite.close()


# ---------------------------------------------------------------- the evidence


def _said(result: RunResult) -> str:
    parts = [result.message or "", result.output_tail or ""]
    if result.compile is not None:
        parts += [result.compile.log or ""]
        parts += [d.message for d in result.compile.diagnostics]
    if result.check is not None and result.check.message:
        parts.append(result.check.message)
    return "\n".join(parts)


def host_processes_with(mark: str) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def _redis_has(key: str) -> bool | None:
    try:
        with socket.create_connection(("127.0.0.1", 6379), timeout=1.0) as conn:
            conn.sendall(f"EXISTS {key}\r\n".encode())
            return conn.recv(64).strip() != b":0"
    except OSError:
        return None


def check_evidence(case: Case, outcome: Outcome, planted: Secrets) -> None:
    result = outcome.result
    said = _said(result)
    why = f"{case.name}: {result.state.value}: {result.message}\n{result.output_tail}"
    for what, arg in case.evidence:
        if what == "absent":
            for path in _host_paths(case):
                assert not path.exists(), f"{path} was written: {why}"
        elif what == "output-has":
            assert re.search(arg, said), f"no {arg!r} in what the run said: {why}"
        elif what == "output-lacks":
            texts = list(planted.values.values()) if arg == "$CANARIES" else [arg]
            for text in texts:
                assert text not in said, f"{text!r} in what the run said: {why}"
        elif what == "message-has":
            assert re.search(arg, result.message or ""), why
        elif what == "message-lacks":
            assert arg not in (result.message or ""), why
        elif what == "no-process":
            deadline = time.monotonic() + 5.0
            while host_processes_with(arg) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert host_processes_with(arg) == [], f"a process of {arg!r} outlived {why}"
        elif what == "timed":
            assert result.timing is not None and result.timing.timed, why
        elif what == "verified":
            assert result.verified and result.timing is not None and result.timing.timed, why
        elif what == "not-verified":
            assert not result.verified, why
        elif what == "next-job":
            after = outcome.after
            assert after is not None
            told = f"next job: {after.state.value}: {after.message}\n{after.output_tail}"
            assert after.state.value == arg, told
            assert "LEFTOVER" not in (after.output_tail or ""), told
            assert "looked for leftovers" in (after.output_tail or ""), told
        elif what == "redis-lacks":
            assert _redis_has(arg) is not True, f"{arg} is in the host's Redis: {why}"
        elif what == "within":
            assert outcome.seconds < float(arg), f"took {outcome.seconds:.1f} s: {why}"


# ---------------------------------------------------------------- the tests


@pytest.mark.parametrize("case", [_param(c) for c in CASES])
def test_a_case_gets_its_verdict_and_changes_nothing(case: Case, suite: Suite) -> None:
    allowed = expected(case)
    if allowed is None:
        pytest.skip(f"the {case.backend} backend cannot run here")
    if not runs_here(case):
        pytest.skip(NO_PROCESS_LIMIT)
    outcome = suite.outcome(case)
    result = outcome.result
    assert result.state.value in allowed, (
        f"{case.name}: {result.state.value}, expected {' or '.join(allowed)}: "
        f"{result.message}\n{result.output_tail}"
    )
    assert result.state is not RunState.done or "done" in allowed
    check_evidence(case, outcome, suite.planted)


def test_the_suite_covers_every_class_and_backend() -> None:
    assert len(CASES) >= 30
    classes = Counter(c.klass for c in CASES)
    assert set(classes) == set(CLASSES), set(CLASSES) - set(classes)
    backends = Counter(c.backend for c in CASES)
    assert set(backends) == {"cuda", "numba-cuda", "triton", "numba-cpu"}, backends
    for case in CASES:
        assert case.evidence, f"{case.name} declares no evidence"
        # What a case leaves behind is named so: nothing else on the host is.
        for mark in case.needs("no-process"):
            assert mark.startswith("kplay-planted"), (case.name, mark)
    stems = Counter(c.path.name.split(".")[0] + c.backend for c in CASES)
    assert max(stems.values()) == 1, "a case is named twice"


def test_every_case_is_in_the_table_of_the_security_page() -> None:
    page = (REPO / "docs" / "security.md").read_text()
    missing = [c.name for c in CASES if f"`{c.name}`" not in page]
    assert not missing, f"docs/security.md does not list {missing}"
