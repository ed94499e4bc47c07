"""`kplay worker`: run this host's workers for the distributed mode and keep them running.

One Celery worker process per GPU (pinned with CUDA_VISIBLE_DEVICES, consuming
`gpu.any`, `gpu.sm<cc>` and `gpu.<device>`), plus one CPU worker on `cpu`. Each uses
Celery's prefork pool with a single child: the job's evaluation already runs one process
further down, and the prefork child between them is what lets Celery's time limits and
lost-child handling work while the worker itself keeps its broker connection.

This process only plans, calibrates missing ceilings (in a child: no CUDA context is
ever made here), starts the workers and restarts any that die, with backoff.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from kplay.kernels import hardware
from kplay.kernels.hardware import GpuFacts, HostFacts
from kplay.workers.celery_app import WorkerConfig
from kplay.workers.fleet_models import WorkerInfo
from kplay.workers.plan import WorkerSpec, plan_workers, select_gpus
from kplay.workers.signing import MissingResultKey, Signer

log = logging.getLogger("kplay.worker")

_POLL_S = 0.5
_STOP_GRACE_S = 30.0


def plan_from_args(args: argparse.Namespace, host: HostFacts) -> list[WorkerSpec]:
    """The workers `kplay worker [--cpu-only] [--gpus ...] [--queues ...]` should run."""
    gpus: list[GpuFacts]
    if getattr(args, "cpu_only", False):
        gpus, include_cpu = [], True
    else:
        gpus, include_cpu = select_gpus(host.gpus, getattr(args, "gpus", None))
    queues = getattr(args, "queues", None)
    only = [q.strip() for q in queues.split(",") if q.strip()] if queues else None
    return plan_workers(host, gpus=gpus, include_cpu=include_cpu, only_queues=only)


def build_command(spec: WorkerSpec, loglevel: str = "INFO") -> list[str]:
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "kplay.workers.celery_app:app",
        "worker",
        "--hostname",
        spec.name,
        "--queues",
        ",".join(spec.queues),
        "--pool",
        "prefork",
        "--concurrency",
        "1",
        "--prefetch-multiplier",
        "1",
        # No gossip, mingle or event heartbeats: the fleet registry replaces them.
        "--without-gossip",
        "--without-mingle",
        "--without-heartbeat",
        "--loglevel",
        loglevel,
    ]


def build_env(spec: WorkerSpec, base: dict[str, str]) -> dict[str, str]:
    env = {**base, **spec.env}
    env["KPLAY_WORKER_ID"] = spec.name
    # Checked here, so that a plan the registry cannot read fails before any worker starts.
    env["KPLAY_WORKER_INFO"] = WorkerInfo.model_validate(spec.info).model_dump_json()
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def base_env() -> dict[str, str]:
    """This environment, with the cache folder made explicit so every child agrees on it."""
    from kplay.kernels.roofline import cache_dir

    env = dict(os.environ)
    env["KPLAY_CACHE_DIR"] = str(cache_dir())
    return env


# ---------------------------------------------------------------- calibration


def calibrate_missing(specs: list[WorkerSpec], env: dict[str, str]) -> None:
    """Measure each distinct device once, in a child, unless its ceilings are cached."""
    from kplay.config import EngineSettings
    from kplay.kernels import roofline

    if EngineSettings().no_auto_calibrate:
        return
    # The engine in this process looks where the workers will.
    cache = EngineSettings.env_name("cache_dir")
    os.environ[cache] = env[cache]
    seen: set[str] = set()
    for spec in specs:
        device = str(spec.info.get("device", ""))
        if not device or device in seen or roofline.load_calibrated(device) is not None:
            continue
        seen.add(device)
        log.info("calibrating %s (once; cached in %s)", device, env[cache])
        proc = subprocess.run(
            [sys.executable, "-m", "kplay.kernels.calibrate", spec.kind],
            env={**env, **spec.env},
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if proc.returncode != 0:
            log.warning(
                "calibration of %s failed; datasheet figures will be used:\n%s",
                device,
                proc.stderr[-2000:],
            )


# ---------------------------------------------------------------- supervision


@dataclass
class _Slot:
    spec: WorkerSpec
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0
    restart_at: float = 0.0


class Supervisor:
    """Starts one process per spec and restarts those that exit, with backoff."""

    def __init__(
        self, specs: list[WorkerSpec], env: dict[str, str], loglevel: str = "INFO"
    ) -> None:
        self.slots = [_Slot(s) for s in specs]
        self.env = env
        self.loglevel = loglevel
        self.stopping = False

    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)
        for slot in self.slots:
            self._start(slot)
        while not self.stopping:
            self.check()
            time.sleep(_POLL_S)
        self.stop()
        return 0

    def check(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is not None:
                code = slot.proc.returncode
                # A worker that ran for a while and then died is not a crash loop.
                slot.failures = 1 if now - slot.started > 60 else slot.failures + 1
                delay = min(30.0, 0.5 * 2 ** (slot.failures - 1))
                log.warning(
                    "worker %s exited with status %s; restarting in %.1f s",
                    slot.spec.name,
                    code,
                    delay,
                )
                slot.proc, slot.restart_at = None, now + delay
            if slot.proc is None and now >= slot.restart_at:
                self._start(slot)

    def _start(self, slot: _Slot) -> None:
        log.info("starting worker %s on queues %s", slot.spec.name, ",".join(slot.spec.queues))
        slot.proc = subprocess.Popen(
            build_command(slot.spec, self.loglevel),
            env=build_env(slot.spec, self.env),
            start_new_session=True,  # signals reach it only through this supervisor
        )
        slot.started = time.monotonic()

    def stop(self) -> None:
        """Warm shutdown: running jobs finish, then the workers exit (killed after a grace)."""
        live = [s.proc for s in self.slots if s.proc is not None and s.proc.poll() is None]
        for proc in live:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + _STOP_GRACE_S
        for proc in live:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def _on_signal(self, signum: int, frame: object) -> None:
        self.stopping = True


def main(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    config = WorkerConfig()
    if not config.broker_url:
        print(
            "kplay worker: set KPLAY_BROKER_URL to the Redis URL, e.g. redis://localhost:6379/0",
            file=sys.stderr,
        )
        return 2
    try:
        Signer.for_settings(config)
    except MissingResultKey as exc:
        print(f"kplay worker: {exc}", file=sys.stderr)
        return 2
    host = hardware.host()
    try:
        specs = plan_from_args(args, host)
    except ValueError as exc:
        print(f"kplay worker: {exc}", file=sys.stderr)
        return 2
    if not specs:
        print(
            f"kplay worker: nothing to run: no GPU was found on this host "
            f"({host.no_gpu_reason}) and no CPU worker was asked for",
            file=sys.stderr,
        )
        return 2
    for spec in specs:
        log.info(
            "planned %s: %s, queues %s", spec.name, spec.info.get("device"), ",".join(spec.queues)
        )
    env = base_env()
    calibrate_missing(specs, env)
    return Supervisor(specs, env).run()
