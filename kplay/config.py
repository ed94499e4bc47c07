"""Every setting of the project, declared once, each one read from the environment as KPLAY_<NAME>.

Three layers, each adding to the one before, as the packages do:

- `EngineSettings`: what the engine (`kplay.kernels`) reads, in every process that evaluates a
  kernel, evaluation children included (`kplay.workers.limits` passes exactly these names on);
- `WorkerSettings`: the pools, their children and the Celery side of the distributed mode;
- `WebSettings` (alias `Settings`): the web app, which also builds the executor.

A field's description is its one-line documentation: `kplay config` prints it with the
effective value, and docs/settings.md is generated from it. No `.env` file is read.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar, Literal

from platformdirs import user_cache_dir
from pydantic import Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kplay.configdefaults import (  # noqa: F401 - default_secret_key_path is imported from here
    APP_DIR_NAME,
    _shown,
    default_database_url,
    default_secret_key_path,
)
from kplay.resources import data_dir

ENV_PREFIX = "KPLAY_"


class _KplaySettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        # An empty variable counts as unset (KPLAY_CACHE_DIR= keeps the default).
        env_ignore_empty=True,
        validate_default=True,
    )

    # The layer name `kplay config` and the docs group each class's own fields under.
    layer: ClassVar[str] = ""

    @classmethod
    def env_name(cls, field: str) -> str:
        """The variable that sets `field`; a KeyError for a field this class lacks."""
        if field not in cls.model_fields:
            raise KeyError(f"{cls.__name__} has no setting {field!r}")
        return ENV_PREFIX + field.upper()

    @classmethod
    def env_names(cls) -> frozenset[str]:
        return frozenset(cls.env_name(f) for f in cls.model_fields)

    @classmethod
    def layer_of(cls, field: str) -> str:
        """The layer that declares `field`: the most basic class of the tree that has it."""
        for klass in reversed(cls.__mro__):
            layer = getattr(klass, "layer", "")
            if layer and field in klass.model_fields:
                return layer
        raise KeyError(f"{cls.__name__} has no setting {field!r}")


class EngineSettings(_KplaySettings):
    """Read by the engine wherever it runs; none of these is a secret."""

    layer: ClassVar[str] = "engine"

    cache_dir: Path | None = Field(
        default=None,
        description="Calibrated ceilings and compile caches; unset: the platform's cache folder",
        json_schema_extra=_shown("the platform's cache folder"),
    )
    force_no_gpu: bool = Field(
        default=False,
        description="Act as if there were no CUDA GPU (simulator, interpreter, compile-only CUDA)",
    )
    no_auto_calibrate: bool = Field(
        default=False,
        description="Never measure a device's ceilings on first need; datasheet figures are "
        "used until `kplay calibrate` runs",
    )
    gpu_timer: Literal["events", "kernels"] = Field(
        default="events",
        description="Time GPU repetitions by CUDA events around each launch, or by the "
        "kernels' own stamps from CUPTI (needs cupti-python; the events stay as a check)",
    )
    cuda_arch: str = Field(
        default="sm_90",
        description="Architecture of the compile-only CUDA report where no GPU runs the kernel "
        "(e.g. sm_80, sm_90a)",
    )
    cuda_include: Path | None = Field(
        default=None,
        description="Include folder given to NVRTC (must hold mma.h) instead of the one found",
        json_schema_extra=_shown("found beside NVRTC"),
    )
    engine_cutlass_include: Path | None = Field(
        default=None,
        description="A CUTLASS include folder (holding cute/tensor.hpp) for CUTLASS C++ cells, "
        "instead of the nvidia-cutlass wheel's",
        json_schema_extra=_shown("the nvidia-cutlass wheel's"),
    )
    engine_cutlass_nvcc_timeout_s: float = Field(
        default=300.0, gt=0, description="How long nvcc may take on one CUTLASS C++ source"
    )
    extra_problems: str = Field(
        default="",
        description="More problem folders, separated by the path separator (':' on Linux)",
    )
    engine_memo_mb: float = Field(
        default=1024.0,
        ge=0,
        description="Per evaluation child: MiB kept for the generated inputs and reference "
        "outputs of recent cases (0: off)",
    )
    engine_rotation_mb: float = Field(
        default=1024.0,
        ge=0,
        description="MiB for the input sets the timed case rotates through: as many of 4 "
        "sets (2 at least) and of 2 sets of buffers (1 at least) as fit, each counted at the "
        "size of the case's inputs and outputs",
    )
    cpu_case_max_mb: float = Field(
        default=512.0,
        gt=0,
        description="MiB a CPU benchmark case may hold at most: a case that grows with the "
        "host's last-level cache (to 4 times it) stops here, and its card says it was capped",
    )
    suspicious_margin: float = Field(
        default=0.10,
        ge=0,
        description="How far above the device's ceilings (beyond the calibration's own "
        "spread) a timed run may land before it ends as `suspicious`; 0.10 is 10%",
    )

    def cache_root(self) -> Path:
        """`cache_dir`, or the platform's user cache folder when it is unset."""
        return self.cache_dir or Path(user_cache_dir(APP_DIR_NAME))

    @property
    def extra_problem_dirs(self) -> list[Path]:
        return [Path(p) for p in self.extra_problems.split(os.pathsep) if p]

    @property
    def memo_budget_bytes(self) -> int:
        return int(self.engine_memo_mb * 1024 * 1024)

    @property
    def rotation_budget_bytes(self) -> int:
        return int(self.engine_rotation_mb * 1024 * 1024)

    @property
    def cpu_case_max_bytes(self) -> int:
        return int(self.cpu_case_max_mb * 1024 * 1024)


class WorkerSettings(EngineSettings):
    """Read by the pools of evaluation children and by both ends of the Celery queue."""

    layer: ClassVar[str] = "worker"

    broker_url: str | None = Field(
        default=None,
        description="Redis URL of the distributed mode (web app and every worker); unset: "
        "embedded mode, runs go to the local pool",
    )
    key_prefix: str = Field(
        default="kplay",
        description="Every Redis key of the deployment starts with it (Celery's too), so "
        "deployments can share a Redis",
    )
    result_key: SecretStr | None = Field(
        default=None,
        description="Distributed mode, required (web app and every worker, the same value): "
        "the secret that signs every verdict and progress record on Redis; at least 32 "
        "characters, e.g. from `python -c 'import secrets; print(secrets.token_hex(32))'`",
    )
    user_run_cap: int = Field(
        default=5, ge=0, description="Runs one user may have queued or running at once (0: no cap)"
    )
    pool_size: int = Field(
        default=2, ge=1, description="Embedded mode: evaluation children running at the same time"
    )
    job_timeout_s: float = Field(
        default=30.0, gt=0, description="Wall-clock limit of one run, compile to roofline"
    )
    profile_timeout_s: float = Field(
        default=180.0, gt=0, description="Wall-clock limit of one profile under Nsight Compute"
    )
    child_start_timeout_s: float = Field(
        default=120.0,
        gt=0,
        description="How long a fresh evaluation child may take to import its libraries and "
        "warm up",
    )
    child_nice: int = Field(
        default=10, ge=0, le=19,
        description="Niceness of evaluation children and learner boxes (0-19): on a host "
        "that also serves pages, runs get the CPU the web server leaves (0: the same "
        "priority as their parent)",
    )  # fmt: skip
    jobs_per_child: int | None = Field(
        default=500,
        gt=0,
        description="Jobs an evaluation child serves before a fresh one replaces it "
        "(1: a fresh process per job)",
    )
    spare_children: int = Field(
        default=1,
        ge=0,
        description="Celery workers: warm children kept idle, ready to take over at once from "
        "one that retires",
    )
    heartbeat_interval_s: float = Field(
        default=2.0, gt=0, description="How often each worker writes its fleet heartbeat"
    )
    heartbeat_ttl_s: float = Field(
        default=10.0,
        gt=0,
        description="How long a heartbeat lives: a worker silent this long drops off the fleet",
    )
    result_ttl_s: int = Field(
        default=7 * 24 * 3600, gt=0, description="How long a verdict stays readable by run id"
    )
    ticket_ttl_s: int = Field(
        default=24 * 3600,
        gt=0,
        description="How long a queued job's ticket (its user, queue and state) lives without news",
    )
    publish_retry_s: float = Field(
        default=120.0, ge=0, description="How long a worker retries a verdict while Redis is away"
    )
    max_deliveries: int = Field(
        default=2, ge=1, description="A job whose worker was lost this often is ended, not rerun"
    )
    eval_target: str = Field(
        default="kplay.kernels.evaluate:evaluate",
        description="Celery workers: the function (module:name) that evaluates one job in the "
        "child",
    )
    worker_id: str | None = Field(
        default=None,
        description="Set by `kplay worker` for each worker process: its id in the fleet registry",
    )
    worker_info: str | None = Field(
        default=None,
        description="Set by `kplay worker` for each worker process: its device facts, as JSON",
    )
    sandbox: Literal["auto", "required", "off"] = Field(
        default="auto",
        description="Evaluation children in a bubblewrap sandbox (no network, a read-only view "
        "of the host, a system-call filter): auto where it works, required refuses to start "
        "without it, off runs plain processes (trusted local use only)",
    )
    sandbox_bwrap: Path | None = Field(
        default=None,
        description="The bubblewrap binary (an unpacked one on a host without the package)",
        json_schema_extra=_shown("bwrap on PATH"),
    )
    sandbox_tmp_mb: int = Field(
        default=1024,
        gt=0,
        description="MiB of each sandbox's private /tmp (its home, caches and job folders) and "
        "of its /dev/shm, both held in memory",
    )
    sandbox_max_tasks: int = Field(
        default=1024,
        gt=0,
        description="Processes and threads one sandbox may hold (its cgroup's pids.max, and "
        "RLIMIT_NPROC where the worker's account is not root)",
    )
    sandbox_cgroup: Path | None = Field(
        default=None,
        description="A delegated cgroup v2 folder to make one group per sandbox in (memory.max, "
        "pids.max); unset: the worker's own cgroup, where it can hand controllers down",
        json_schema_extra=_shown("the worker's own cgroup"),
    )
    sandbox_ro_paths: str = Field(
        default="",
        description="More host folders shown read-only in every sandbox (a CUDA toolkit outside "
        "/usr, say), separated by the path separator",
    )
    sandbox_shared_dirs: str = Field(
        default="",
        description="Host folders shown read-write in every sandbox, through which children "
        "could exchange files: for tests and debugging, never on a public instance",
    )


class WebSettings(WorkerSettings):
    """Read by the web app (`kplay serve`)."""

    layer: ClassVar[str] = "web"

    host: str = Field(default="127.0.0.1", description="Address the web app listens on")
    port: int = Field(default=8000, ge=0, le=65535, description="Port the web app listens on")
    database_url: str = Field(
        default_factory=default_database_url,
        description="Any SQLAlchemy URL, e.g. postgresql+psycopg://user@host:5432/db",
        json_schema_extra=_shown("SQLite, kplay.sqlite3 in the user data folder"),
    )
    book_dir: Path = Field(
        default_factory=lambda: data_dir("book"),
        description="Folder of the chapters to serve",
        json_schema_extra=_shown("the installed book"),
    )
    results_dir: Path = Field(
        default_factory=lambda: data_dir("results"),
        description="Measured figures the chapters quote (JSON files written by the benchmarks)",
        json_schema_extra=_shown("the installed bench results"),
    )
    max_source_bytes: int = Field(
        default=65536,
        gt=0,
        description="Largest kernel source accepted (larger gets a 413 naming the limit)",
    )
    anonymous_user: str = Field(
        default="anonymous",
        description="An anonymous reader's runs are owned by this name, a dash and the full id "
        "of the reader's signed session (an account's runs: acct: and the account's id)",
    )
    stale_after_s: float = Field(
        default=600.0,
        gt=0,
        description="A run the executor no longer knows, with no news for this long, is ended "
        "as lost",
    )
    reconcile_interval_s: float = Field(
        default=30.0,
        gt=0,
        description="Distributed mode: how often unfinished runs are checked against the queue",
    )
    reconcile_quiet_s: float = Field(
        default=15.0,
        ge=0,
        description="Distributed mode: how long a run must have been quiet before it can be "
        "judged lost",
    )
    history_limit: int = Field(default=20, ge=0, description="Attempts listed under a cell")
    log_level: str = Field(default="info", description="Logging level of uvicorn and the app")
    secret_key: SecretStr | None = Field(
        default=None,
        description="Signs readers' session cookies; unset: a random key made at first start "
        "and kept in secret_key (mode 0600) in the user data folder. Never passed to a child",
        json_schema_extra=_shown("made at first start, kept in the user data folder"),
    )
    max_body_bytes: int | None = Field(
        default=None,
        gt=0,
        description="Largest request body read (larger gets a 413 before any parsing); unset: "
        "three times max_source_bytes plus 16 KiB, as form encoding can triple a source",
        json_schema_extra=_shown("3 × max_source_bytes + 16384"),
    )
    run_rate_per_reader: str = Field(
        default="20/minute",
        description="Runs one reader (one session cookie) may start, as `N/second|minute|hour` "
        "(several separated by ';')",
    )
    run_rate_per_ip: str = Field(
        default="120/minute",
        description="Runs one client address may start, whatever its cookies, in the same form",
    )
    rate_limit_storage: str = Field(
        default="memory://",
        description="Where the run-start counters live: memory:// (one web process) or a "
        "redis:// URL shared by every web process",
    )

    @field_validator("run_rate_per_reader", "run_rate_per_ip")
    @classmethod
    def _a_rate(cls, value: str) -> str:
        # Imported here: the engine's children read these settings and need no rate limiter.
        from limits import parse_many

        try:
            parse_many(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not a rate such as '20/minute' or '5/second;100/hour'"
            ) from None
        return value

    def body_limit(self) -> int:
        """The request-body limit in bytes: `max_body_bytes`, or one a largest source fits."""
        if self.max_body_bytes is not None:
            return self.max_body_bytes
        return 3 * self.max_source_bytes + 16384


# The name the web app has always used.
Settings = WebSettings

# Every layer, most basic first.
LAYERS: tuple[type[_KplaySettings], ...] = (EngineSettings, WorkerSettings, WebSettings)
