"""The evaluation sandbox, attacked from inside a job (tests/workers/escapes.py) and
judged from the host: no network, no view of the host's processes or private files, no
writes outside the child's own /tmp, limits that stay put, no process that outlives its
job, and a system-call filter. Real bubblewrap; the tests skip only where it is missing
(a failure under KPLAY_REQUIRE_SERVICES=1).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from platformdirs import user_data_dir

from kplay.config import APP_DIR_NAME
from kplay.kernels.models import RunState
from kplay.workers import sandbox_view
from kplay.workers.limits import MIB
from kplay.workers.runner import WorkerPool
from kplay.workers.sandbox import SandboxConfig, SandboxUnavailable
from tests.conftest import skip_or_fail
from tests.workers.runner_support import SMALL, job

pytestmark = pytest.mark.sandbox

PROBE = "tests.workers.escapes:probe"
LIMITS = SMALL.model_copy(update={"wall_timeout_s": 8.0, "cpu_seconds": 3, "jobs_per_child": 50})


def sandboxed_pool(target: str = PROBE, **limits: Any) -> WorkerPool:
    if shutil.which("bwrap") is None and SandboxConfig.from_settings().bwrap is None:
        skip_or_fail("bubblewrap (bwrap) is not installed")
    try:
        # The settings' bubblewrap (KPLAY_SANDBOX_BWRAP), and nothing less than the sandbox.
        required = SandboxConfig.from_settings().model_copy(update={"mode": "required"})
        return WorkerPool(1, LIMITS.model_copy(update=limits), target, sandbox=required)
    except SandboxUnavailable as exc:
        skip_or_fail(str(exc))
        raise


@pytest.fixture(scope="module")
def pool() -> Iterator[WorkerPool]:
    with sandboxed_pool() as p:
        yield p


def attempt(pool: WorkerPool, source: str) -> dict[str, Any]:
    result = pool.run(job(source))
    assert result.state is RunState.done, (result.message, result.output_tail)
    return json.loads(result.message or "{}")


def host_processes_with(mark: str) -> list[int]:
    """Pids of the host's processes whose command line holds `mark`."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if mark.encode() in f.read():
                        found.append(int(name))
            except OSError:
                pass
    return found


def exposed_paths() -> list[Path]:
    """What the sandbox shows of the host (the interpreter, the checkout on PYTHONPATH)."""
    paths = sandbox_view.python_paths()
    paths += [Path(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return [Path(os.path.realpath(p)) for p in paths]


# ---------------------------------------------------------------- the status


def test_the_pool_reports_an_active_sandbox_with_its_filter(pool: WorkerPool) -> None:
    status = pool.sandbox
    assert status.active and status.seccomp and not status.trusted_local_only
    assert status.bwrap and "sandboxed" in status.summary()


def test_the_child_is_an_ordinary_user_named_alone(pool: WorkerPool) -> None:
    seen = attempt(pool, "identity:")
    assert (seen["uid"], seen["gid"]) == (sandbox_view.UID, sandbox_view.GID)
    assert seen["users"] == [sandbox_view.USER]
    assert seen["hostname"] != socket.gethostname()


# ---------------------------------------------------------------- network


@pytest.mark.redis
def test_no_connection_reaches_the_hosts_redis(pool: WorkerPool) -> None:
    try:
        socket.create_connection(("127.0.0.1", 6379), timeout=2.0).close()
    except OSError:
        skip_or_fail("no Redis on 127.0.0.1:6379 to try to reach")
    seen = attempt(pool, "connect:127.0.0.1:6379")
    assert not seen["ok"], seen
    assert "refused" in seen["error"].lower() or "unreachable" in seen["error"].lower()


# ---------------------------------------------------------------- processes


def test_the_parents_environment_and_the_hosts_processes_are_out_of_sight(
    pool: WorkerPool,
) -> None:
    assert not attempt(pool, f"read:/proc/{os.getpid()}/environ")["ok"]
    processes = attempt(pool, "processes:")["processes"]
    # Its own pid namespace: bubblewrap's init, the evaluator and the listing itself.
    assert len(processes) <= 4, processes
    assert all(int(pid) < 100 for pid in processes)
    assert str(os.getpid()) not in processes or "pytest" not in processes[str(os.getpid())]


# ---------------------------------------------------------------- files


def test_the_hosts_private_folders_are_not_visible(pool: WorkerPool) -> None:
    exposed = exposed_paths()
    home = Path.home()
    # Folders of the home that hold no path the sandbox shows must not be there at all.
    hidden = [
        entry
        for entry in sorted(home.iterdir())[:50]
        if not any(p == entry or p.is_relative_to(entry) for p in exposed)
    ]
    seen = attempt(pool, f"listdir:{home}")
    if seen["ok"]:
        assert not {e.name for e in hidden} & set(seen["entries"]), seen
    for path in (Path(user_data_dir(APP_DIR_NAME)), Path("/var"), Path("/srv"), Path("/home")):
        listing = attempt(pool, f"listdir:{path}")
        assert not listing["ok"] or listing["entries"] == [], (path, listing)
    root = attempt(pool, "listdir:/root")
    if root["ok"]:  # only the way to a bound path, e.g. a pyenv Python under /root
        allowed = {p.relative_to("/root").parts[0] for p in exposed if p.is_relative_to("/root")}
        assert set(root["entries"]) <= allowed, root


def test_nothing_outside_the_childs_own_tmp_can_be_written(pool: WorkerPool) -> None:
    repo = Path(__file__).resolve().parents[2]
    name = f"kplay-escape-{uuid.uuid4().hex}"
    for target in (repo / name, Path("/usr") / name, Path("/") / name, Path("/etc") / name):
        seen = attempt(pool, f"write:{target}")
        assert not seen["ok"], (target, seen)
        assert not target.exists()
    # /tmp inside is the box's own: the write succeeds there and never reaches the host.
    assert attempt(pool, f"write:/tmp/{name}")["ok"]
    assert not (Path("/tmp") / name).exists()


# ---------------------------------------------------------------- limits


def test_hard_limits_cannot_be_raised(pool: WorkerPool) -> None:
    tried = attempt(pool, "raise-hard:")["tried"]
    for key in ("NOFILE", "FSIZE", "CORE", "CPU"):
        assert tried[key] == "refused", tried


def test_a_raised_cpu_budget_does_not_carry_into_the_next_job(pool: WorkerPool) -> None:
    raised = attempt(pool, "raise-soft-cpu:")
    budget = attempt(pool, "cpu-budget:")
    assert budget["soft"] < raised["soft"]
    assert budget["soft"] - budget["used"] <= LIMITS.cpu_seconds + 2


def test_cpu_burnt_in_subprocesses_counts_against_the_job() -> None:
    # A wall limit far above the CPU budget: on a busy two-CPU host two burners may get a
    # fraction of a CPU each, and the wall clock must not end the job before its CPU does.
    wall = 40.0
    with sandboxed_pool(wall_timeout_s=wall) as own:
        started = time.monotonic()
        result = own.run(job("burn-in-children:2"))
        assert result.state is RunState.timeout, (result.state, result.message)
        assert result.message == (
            f"timed out: used its {LIMITS.cpu_seconds} s of CPU time (the limit on CPU time)"
        )
        assert time.monotonic() - started < wall


def test_a_job_runs_nicer_than_the_server_and_cannot_take_that_back(pool: WorkerPool) -> None:
    assert LIMITS.niceness > 0
    assert attempt(pool, "niceness:")["nice"] >= LIMITS.niceness
    tried = attempt(pool, "renice-down:")
    assert tried["ok"] is False, tried
    assert tried["nice"] >= LIMITS.niceness


# ---------------------------------------------------------------- leftovers


def test_a_background_process_does_not_outlive_its_job(pool: WorkerPool) -> None:
    mark = f"{3000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    attempt(pool, f"background:{mark}")
    assert host_processes_with(mark) == []
    assert attempt(pool, "identity:")["ok"]  # the evaluator itself was left alone


def test_a_compiler_still_running_at_the_timeout_dies_with_the_box(pool: WorkerPool) -> None:
    mark = f"{4000 + uuid.uuid4().int % 1000}.{uuid.uuid4().int % 10**6}"
    result = pool.run(job(f"compile-and-hang:{mark}"))
    assert result.state is RunState.timeout
    deadline = time.monotonic() + 5.0
    while host_processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert host_processes_with(mark) == []
    assert attempt(pool, "identity:")["ok"]  # a fresh child took over


# ---------------------------------------------------------------- system calls


def test_the_filter_denies_what_no_kernel_needs_and_keeps_sockets(pool: WorkerPool) -> None:
    calls = attempt(pool, "syscalls:")["calls"]
    assert calls["ptrace"] == calls["unshare"] == calls["personality"] == "EPERM", calls
    assert calls["keyctl"] == "EPERM", calls
    assert calls["socketpair"] == calls["socket"] == "allowed", calls


# ---------------------------------------------------------------- the real engine

SOCKET_KERNEL = """\
import socket

import numba

# Learner code runs at import: here it tries the host's Redis.
socket.create_connection(("127.0.0.1", 6379), timeout=2.0).close()


@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""


def test_the_engine_in_the_sandbox_refuses_a_socket_and_passes_honest_kernels() -> None:
    """The socket fails; the correct solutions of three backends still pass (Numba's LLVM
    JIT, Numba's CUDA target or simulator, Triton compiled or interpreted)."""
    from kplay.kernels.catalog import PROBLEMS_DIR
    from kplay.kernels.models import RunJob

    solutions = PROBLEMS_DIR / "vector_add" / "solutions" / "correct"
    honest = {
        "numba-cpu": "vector_add.numba_cpu.py",
        "numba-cuda": "vector_add.numba_cuda.py",
        "triton": "vector_add.triton.py",
    }
    limits = {"wall_timeout_s": 60.0, "cpu_seconds": 120, "memory_bytes": 4096 * MIB}
    with sandboxed_pool("kplay.kernels.evaluate:evaluate", **limits) as engine:
        attacked = engine.run(
            RunJob(problem="vector_add", backend="numba-cpu", source=SOCKET_KERNEL)
        )
        passed = {
            backend: engine.run(
                RunJob(problem="vector_add", backend=backend, source=(solutions / name).read_text())
            )
            for backend, name in honest.items()
        }
    assert attacked.state is not RunState.done
    said = f"{attacked.message} {attacked.output_tail} {attacked.compile}"
    assert "Connection refused" in said or "unreachable" in said, said
    for backend, result in passed.items():
        assert result.state is RunState.done, (backend, result.message, result.output_tail)


# ---------------------------------------------------------------- caches


def test_compile_caches_are_private_to_each_child() -> None:
    # One job per child: the second job runs in a fresh box and must not find what the
    # first one planted in its cache (a compiled artefact a later job would load).
    planted = sandbox_view.CACHE / "planted.so"
    with sandboxed_pool(jobs_per_child=1) as pool:
        assert attempt(pool, f"write:{planted}")["ok"]
        assert attempt(pool, f"read:{planted}")["ok"] is False


def test_calibrated_ceilings_are_copied_in_not_shared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KPLAY_CACHE_DIR", str(tmp_path))
    (tmp_path / "ceilings").mkdir()
    host_copy = tmp_path / "ceilings" / "some-device.json"
    host_copy.write_text('{"device": "some device"}')
    inside = sandbox_view.ENGINE_CACHE / "ceilings" / "some-device.json"
    with sandboxed_pool() as pool:
        assert attempt(pool, f"read:{inside}") == {"ok": True, "bytes": 25}
        assert attempt(pool, f"write:{inside}")["ok"]
    assert host_copy.read_text() == '{"device": "some device"}'
