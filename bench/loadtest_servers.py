"""The deployments a load test (bench/loadtest.py) starts: `kplay serve` in a subprocess on a
free port with its own data folder, and for the distributed mode a private Redis
(bench/celery_fleet.py) and one `kplay worker --cpu-only`."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    """`kplay serve` (and for celery a private Redis and one CPU worker) in subprocesses."""

    def __init__(self, mode: str, workdir: Path, server_env: dict[str, str]) -> None:
        self.mode = mode
        self.dir = workdir
        self.port = free_port()
        self.db = self.dir / "kplay.sqlite3"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.redis: Any = None
        self.env = {
            **os.environ,
            "KPLAY_HOST": "127.0.0.1",
            "KPLAY_PORT": str(self.port),
            "KPLAY_DATABASE_URL": f"sqlite:///{self.db}",
            "KPLAY_SECRET_KEY": secrets.token_urlsafe(48),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            **server_env,
        }

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kplay(self, *args: str, log: str) -> subprocess.Popen[bytes]:
        with open(self.dir / log, "ab") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kplay.cli", *args],
                env=self.env,
                cwd=ROOT,
                stdout=out,
                stderr=out,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        if self.mode == "celery":
            from bench.celery_fleet import Redis

            self.redis = Redis()
            self.redis.start()
            self.env.update(
                KPLAY_BROKER_URL=self.redis.url,
                KPLAY_KEY_PREFIX=f"kplayload-{secrets.token_hex(4)}",
                KPLAY_RESULT_KEY=secrets.token_hex(32),
            )
            self.kplay("worker", "--cpu-only", log="worker.log")
        self.kplay("serve", log="serve.log")
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    break
            time.sleep(0.2)
        else:
            sys.exit(f"kplay serve did not answer; see {self.dir / 'serve.log'}")
        if self.mode == "celery":
            while time.monotonic() < deadline:
                if httpx.get(f"{self.url}/api/v1/devices", timeout=5).json():
                    return
                time.sleep(0.5)
            sys.exit(f"no worker registered; see {self.dir / 'worker.log'}")

    def states(self) -> dict[str, int]:
        """Every run in the server's database, by state."""
        import sqlite3

        with contextlib.closing(sqlite3.connect(self.db)) as con:
            return dict(con.execute("SELECT state, count(*) FROM runs GROUP BY state").fetchall())

    def stop(self) -> None:
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self.redis is not None:
            self.redis.stop()
