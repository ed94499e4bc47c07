"""Plumbing of the distributed-mode benchmarks: a private Redis server, a sink that records
when each verdict arrives, and a fleet of CPU workers with one CeleryExecutor on a fresh key
prefix.

Used by bench/celery_overhead.py and bench/fleet_gpu.py.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kplay.kernels.models import ProgressEvent, RunResult  # noqa: E402


class Sink:
    def __init__(self) -> None:
        self.done: dict[str, tuple[float, RunResult]] = {}
        self.cond = threading.Condition()

    def on_event(self, event: ProgressEvent) -> None:
        pass

    def on_result(self, result: RunResult) -> None:
        with self.cond:
            self.done[result.job_id] = (time.perf_counter(), result)
            self.cond.notify_all()

    def wait(self, ids: list[str], timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while not all(i in self.done for i in ids):
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(left)
        return True


class Redis:
    def __init__(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            sys.exit("redis-server is not installed")
        self.exe = exe
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="kplay-bench-redis-")
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redis

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
                self.dir,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for _ in range(200):
            try:
                if redis.Redis(port=self.port).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        sys.exit("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None


class Fleet:
    """Workers and one executor on a fresh key prefix; the workers evaluate with `target`
    (KPLAY_EVAL_TARGET, "module:function")."""

    def __init__(self, url: str, logs: Path, target: str) -> None:
        from kplay.workers.celery_app import WorkerConfig

        self.url = url
        self.prefix = f"kplaybench-{uuid.uuid4().hex[:8]}"
        self.logs = logs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.env = {
            **os.environ,
            "KPLAY_BROKER_URL": url,
            "KPLAY_KEY_PREFIX": self.prefix,
            "KPLAY_EVAL_TARGET": target,
            "KPLAY_HEARTBEAT_INTERVAL_S": "0.5",
            "KPLAY_HEARTBEAT_TTL_S": "2.5",
            "KPLAY_NO_AUTO_CALIBRATE": "1",
            "KPLAY_PUBLISH_RETRY_S": "60",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.config = WorkerConfig(
            broker_url=url, key_prefix=self.prefix, user_run_cap=0, heartbeat_ttl_s=2.5
        )
        self.sink = Sink()
        self.executor: Any = None

    def start_executor(self) -> Any:
        from kplay.workers.celery_executor import CeleryExecutor

        self.executor = CeleryExecutor(self.url, config=self.config, janitor_interval_s=0.5)
        self.executor.start(self.sink)
        return self.executor

    def add_worker(self, name: str) -> None:
        from kplay.workers.fleet_main import build_command, build_env
        from kplay.workers.plan import WorkerSpec

        info = {"id": name, "kind": "cpu", "device": "bench", "queues": ["cpu"]}
        spec = WorkerSpec(name, "cpu", ("cpu",), {"CUDA_VISIBLE_DEVICES": ""}, info)
        with open(self.logs / f"{name.replace('@', '_')}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                build_command(spec, "WARNING"),
                env=build_env(spec, self.env),
                cwd=ROOT,
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if any(w["id"] == name for w in self.executor.devices()):
                return
            time.sleep(0.1)
        sys.exit(f"worker {name} did not start; see {self.logs}")

    def kill(self, name: str) -> None:
        proc = self.procs.pop(name)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def close(self) -> None:
        if self.executor is not None:
            self.executor.stop()
        for proc in self.procs.values():
            os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
