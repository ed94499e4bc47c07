"""Evaluation targets, fixtures and process helpers for the distributed-mode tests.

`target` stands in for kernels.evaluate inside real workers
("tests.workers.celery_support:target"); the job's `source` picks the behaviour.
Test modules import the fixtures by their function names (`deployment_fixture`,
`redis_base_fixture`) and use them by their fixture names. Every test gets a fresh key
prefix, and Celery's own keys sit under it too, so tests never see each other's queues
even on a shared Redis.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kplay.kernels.models import ProgressEvent, RunJob, RunResult, RunState
from kplay.workers.fleet_models import LiveWorker
from tests.conftest import skip_or_fail

Emit = Callable[[ProgressEvent], None]
ROOT = Path(__file__).resolve().parents[2]
TARGET = "tests.workers.celery_support:target"
# The deployments' result key (KPLAY_RESULT_KEY): workers and executors of the tests share it.
RESULT_KEY = secrets.token_hex(32)
# How long a test waits for a verdict or a worker before it fails. Generous: on a busy
# machine (the suite runs on several processes) workers and their children start slowly,
# and a job whose worker dies waits for a heartbeat to expire; a passing test never waits
# this long.
WAIT_S = 150.0


# ---------------------------------------------------------------- evaluation target


def target(job: RunJob, emit: Emit) -> RunResult:
    """`ok`, `sleep:<s>`, `kill-worker` (its whole Celery worker), `kill-pool-child`."""
    kind, _, arg = job.source.partition(":")
    emit(ProgressEvent(job_id=job.job_id, state=RunState.compiling, detail="pretending"))
    if kind == "sleep":
        time.sleep(float(arg))
    elif kind == "kill-pool-child":
        os.kill(os.getppid(), signal.SIGKILL)
        os._exit(1)
    elif kind == "kill-worker":
        # The worker's process group: its main process and the pool child, as when the
        # machine under it goes away. This process leads a session of its own.
        os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)
        os._exit(1)
    emit(ProgressEvent(job_id=job.job_id, state=RunState.checking, detail="still pretending"))
    return RunResult(
        job_id=job.job_id,
        problem=job.problem,
        backend=job.backend,
        state=RunState.done,
        message=f"devices={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}",
    )


# ---------------------------------------------------------------- Redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    import redis

    try:
        return bool(redis.Redis(port=port, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


class RedisServer:
    """A private redis-server that keeps nothing on disk, restartable on the same port."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            skip_or_fail("redis-server is not installed")
        self.exe = str(exe)
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [
                self.exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for(lambda: _answers(self.port), 10, "redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None


@pytest.fixture(scope="session", name="redis_base")
def redis_base_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """redis://host:port of the shared Redis, or of a private one when none answers."""
    if _answers(6379):
        yield "redis://127.0.0.1:6379"
        return
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield f"redis://127.0.0.1:{server.port}"
    server.stop()


# ---------------------------------------------------------------- a deployment


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s: {what}")


class RecordingSink:
    def __init__(self, fail_results: bool = False) -> None:
        self.events: list[ProgressEvent] = []
        self.results: dict[str, RunResult] = {}
        self.fail_results = fail_results
        self.lock = threading.Lock()

    def on_event(self, event: ProgressEvent) -> None:
        with self.lock:
            self.events.append(event)

    def on_result(self, result: RunResult) -> None:
        if self.fail_results:
            raise RuntimeError("the database is away")
        with self.lock:
            self.results[result.job_id] = result

    def wait(self, job_id: str, timeout_s: float = WAIT_S) -> RunResult:
        return wait_for(lambda: self.results.get(job_id), timeout_s, f"a result for {job_id}")


class Deployment:
    """One test's corner of Redis, its workers and its executors."""

    def __init__(self, url: str, logs: Path) -> None:
        from kplay.workers.celery_app import WorkerConfig

        self.url = url
        self.prefix = f"kplaytest-{uuid.uuid4().hex[:10]}"
        self.logs = logs
        self.workers: list[subprocess.Popen[bytes]] = []
        self.executors: list[Any] = []
        self.env = {
            **os.environ,
            "KPLAY_BROKER_URL": url,
            "KPLAY_KEY_PREFIX": self.prefix,
            "KPLAY_RESULT_KEY": RESULT_KEY,
            "KPLAY_EVAL_TARGET": TARGET,
            "KPLAY_HEARTBEAT_INTERVAL_S": "0.5",
            "KPLAY_HEARTBEAT_TTL_S": "2.5",
            "KPLAY_JOB_TIMEOUT_S": "20",
            "KPLAY_CHILD_START_TIMEOUT_S": "60",
            "KPLAY_PUBLISH_RETRY_S": "30",
            "KPLAY_NO_AUTO_CALIBRATE": "1",
            "KPLAY_CACHE_DIR": str(logs / "cache"),
        }
        self.config = WorkerConfig(
            broker_url=url,
            key_prefix=self.prefix,
            result_key=RESULT_KEY,
            heartbeat_ttl_s=2.5,
            user_run_cap=0,
        )

    def executor(self, sink: RecordingSink | None = None, **kwargs: Any) -> Any:
        from kplay.workers.celery_executor import CeleryExecutor

        kwargs.setdefault("janitor_interval_s", 0.5)
        ex = CeleryExecutor(self.url, config=self.config, **kwargs)
        ex.start(sink if sink is not None else RecordingSink())
        self.executors.append(ex)
        return ex

    def start_worker(
        self,
        name: str,
        queues: tuple[str, ...] = ("cpu",),
        env: dict[str, str] | None = None,
        wait: bool = True,
    ) -> subprocess.Popen[bytes]:
        from kplay.workers.fleet_main import build_command, build_env
        from kplay.workers.plan import WorkerSpec

        info = {"id": name, "kind": "cpu", "device": "test device", "queues": list(queues)}
        spec = WorkerSpec(name, "cpu", queues, env or {"CUDA_VISIBLE_DEVICES": ""}, info)
        return self.spawn(
            build_command(spec, "WARNING"),
            build_env(spec, self.env),
            name,
            wait_for_id=name if wait else None,
        )

    def spawn(
        self, argv: list[str], env: dict[str, str], log_name: str, wait_for_id: str | None = None
    ) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{log_name.replace('@', '_')}.log", "ab")  # noqa: SIM115
        proc = subprocess.Popen(
            argv, env=env, cwd=ROOT, stdout=log, stderr=log, start_new_session=True
        )
        log.close()
        self.workers.append(proc)
        if wait_for_id is not None:
            self.wait_worker(wait_for_id)
        return proc

    def live(self) -> list[LiveWorker]:
        from kplay.workers.fleet import live_workers
        from kplay.workers.jobstore import JobStore, connect

        return live_workers(JobStore(connect(self.url), self.prefix))

    def wait_worker(self, worker_id: str, timeout_s: float = WAIT_S) -> LiveWorker:
        return wait_for(
            lambda: next((w for w in self.live() if w.id == worker_id), None),
            timeout_s,
            f"worker {worker_id} to announce itself",
        )

    @staticmethod
    def kill(proc: subprocess.Popen[bytes]) -> None:
        """SIGKILL the worker's whole process group: a machine that went away."""
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)

    def close(self) -> None:
        for ex in self.executors:
            ex.stop()
        for proc in self.workers:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.workers:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill(proc)
        self._drop_keys()

    def _drop_keys(self) -> None:
        import redis

        try:
            client = redis.Redis.from_url(self.url, socket_connect_timeout=2)
            keys = list(client.scan_iter(match=f"{self.prefix}*", count=500))
            if keys:
                client.delete(*keys)
        except redis.RedisError:
            pass


@pytest.fixture(name="deployment")
def deployment_fixture(redis_base: str, tmp_path: Path) -> Iterator[Deployment]:
    dep = Deployment(f"{redis_base}/0", tmp_path)
    yield dep
    dep.close()


def job(source: str = "ok", backend: str = "numba-cpu", **kwargs: Any) -> RunJob:
    return RunJob(problem="vector_add", backend=backend, source=source, **kwargs)
