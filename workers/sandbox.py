"""The sandbox every evaluation child runs in: bubblewrap, namespaces, a seccomp filter.

A sandboxed child has no network (an empty network namespace), its own pid, IPC and UTS
namespaces, a user namespace in which it is an ordinary user (uid 1000, every capability
dropped, no further user namespaces), a read-only view of only what it needs
(`sandbox_view`), a size-bounded private /tmp for everything it writes, a system-call
filter (`sandbox_seccomp`) and, where the host delegates cgroup v2, a cgroup of its own
(`sandbox_cgroup`). What runs in it is reached from outside through a `box.Box`.

`KPLAY_SANDBOX` chooses: `auto` (the default) sandboxes where bubblewrap works and says
at start when it does not; `required` refuses to start a pool without it; `off` runs
children as plain processes. A pool's `sandbox` attribute is the `SandboxStatus`; where
it is not `active`, the server must be treated as a trusted local tool.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Literal

from pydantic import BaseModel, ConfigDict, Field

from kplay.config import EngineSettings, WorkerSettings
from kplay.workers import sandbox_view as view
from kplay.workers.box import Box
from kplay.workers.limits import Limits, child_env
from kplay.workers.sandbox_cgroup import BoxCgroup, CgroupUnavailable, find_base
from kplay.workers.sandbox_seccomp import SeccompUnavailable, filter_program, program_fd

log = logging.getLogger(__name__)

Mode = Literal["auto", "required", "off"]
MIB = 1024 * 1024
_INFO_TIMEOUT_S = 10.0
_MAX_CEILING_FILES = 64


class SandboxUnavailable(RuntimeError):
    """KPLAY_SANDBOX=required, and the sandbox cannot be set up here."""


class SandboxConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = "auto"
    bwrap: Path | None = None
    tmp_bytes: int = Field(default=1024 * MIB, gt=0)
    max_tasks: int = Field(default=1024, gt=0)
    cgroup: Path | None = None
    ro_paths: tuple[Path, ...] = ()
    shared_dirs: tuple[Path, ...] = ()

    @classmethod
    def from_settings(cls, settings: WorkerSettings | None = None) -> SandboxConfig:
        s = settings or WorkerSettings()
        return cls(
            mode=s.sandbox,
            bwrap=s.sandbox_bwrap,
            tmp_bytes=s.sandbox_tmp_mb * MIB,
            max_tasks=s.sandbox_max_tasks,
            cgroup=s.sandbox_cgroup,
            ro_paths=tuple(_paths(s.sandbox_ro_paths)),
            shared_dirs=tuple(_paths(s.sandbox_shared_dirs)),
        )


def _paths(joined: str) -> list[Path]:
    return [Path(p) for p in joined.split(os.pathsep) if p]


class SandboxStatus(BaseModel):
    """What a pool's children run in; reported at start, on the fleet and to the app."""

    mode: Mode
    active: bool = False
    bwrap: str | None = None
    version: str | None = None
    seccomp: bool = False
    cgroup: str | None = None
    notes: list[str] = Field(default_factory=list)

    @property
    def trusted_local_only(self) -> bool:
        """Children are plain processes: only the machine's own user may submit code."""
        return not self.active

    def summary(self) -> str:
        if not self.active:
            why = "; ".join(self.notes) or "not set up"
            return f"evaluation children are NOT sandboxed ({why}): trusted local mode"
        parts = [f"{self.version or 'bubblewrap'} at {self.bwrap}"]
        parts.append("seccomp filter on" if self.seccomp else "no seccomp filter")
        parts.append(f"cgroup under {self.cgroup}" if self.cgroup else "no cgroup")
        text = "evaluation children are sandboxed: " + ", ".join(parts)
        return text + (f" ({'; '.join(self.notes)})" if self.notes else "")


class _Features(BaseModel):
    size: bool = False  # --size before --tmpfs (bubblewrap 0.5)
    disable_userns: bool = False  # --disable-userns (bubblewrap 0.8)


class Sandbox:
    """Starts children in bubblewrap; one per pool, shared by its children."""

    def __init__(self, config: SandboxConfig, status: SandboxStatus, features: _Features) -> None:
        self.config = config
        self.status = status
        self.bwrap = status.bwrap or "bwrap"
        self.features = features
        self.cgroup_base = Path(status.cgroup) if status.cgroup else None
        # The synthetic passwd and group, shown read-only to every child of the pool.
        self._support = Path(tempfile.mkdtemp(prefix="kplay-sandbox-"))
        self._identity = view.identity_files(self._support)

    def close(self) -> None:
        shutil.rmtree(self._support, ignore_errors=True)

    # ------------------------------------------------------------ what the child gets

    def child_env(self, limits: Limits) -> dict[str, str]:
        """The child's environment, with every path pointing into the sandbox's /tmp."""
        env = child_env(limits, view.HOME, view.CACHE)
        env[EngineSettings.env_name("cache_dir")] = str(view.ENGINE_CACHE)
        return env

    def child_limits(self, limits: Limits) -> Limits:
        """In a user namespace RLIMIT_NPROC counts the box's own tasks, so it is set."""
        if limits.max_processes is not None:
            return limits
        return limits.model_copy(update={"max_processes": self.config.max_tasks})

    def arguments(
        self, env: Mapping[str, str], fds: dict[str, int], gpu: bool = True,
        binds: Sequence[Path] = (), readonly: Sequence[Path] = (),
    ) -> list[str]:  # fmt: skip
        """The bubblewrap command line up to `--`; `fds` names the descriptors it reads.

        Without `gpu` the box gets no NVIDIA device file at all (a learner's box). `binds`
        are host folders of this one box shown read-write (a profile's report folder),
        `readonly` more folders shown read-only (Nsight Compute's installation).
        """
        size = ["--size", str(self.config.tmp_bytes)] if self.features.size else []
        args = [self.bwrap, "--unshare-user", "--uid", str(view.UID), "--gid", str(view.GID)]
        if self.features.disable_userns:
            args.append("--disable-userns")
        args += [
            *("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"),
            *("--unshare-cgroup-try", "--hostname", "kplay-sandbox"),
            *("--die-with-parent", "--new-session", "--cap-drop", "ALL"),
            *size, "--tmpfs", str(view.TMP),
            *("--dir", str(view.HOME), "--dir", str(view.CACHE)),
            *("--proc", "/proc", "--dev", "/dev"),
            *size, "--tmpfs", "/dev/shm",
        ]  # fmt: skip
        for node in view.gpu_nodes(env.get("CUDA_VISIBLE_DEVICES")) if gpu else ():
            args += ["--dev-bind", str(node), str(node)]
        args += ["--remount-ro", "/dev", *view.system_args(), *self._identity]
        readonly, _ = view.readonly_args(
            [*view.python_paths(), *view.operator_paths(env, (*self.config.ro_paths, *readonly))]
        )
        args += readonly
        for folder in (*self.config.shared_dirs, *binds):
            args += ["--bind-try", str(folder), str(folder)]
        args += self._ceiling_args(fds)
        if "seccomp" in fds:
            args += ["--seccomp", str(fds["seccomp"])]
        if "info" in fds:
            args += ["--info-fd", str(fds["info"])]
        return [*args, "--remount-ro", "/", "--chdir", str(view.HOME), "--"]

    def _ceiling_args(self, fds: dict[str, int]) -> list[str]:
        """Copies of the host's calibrated ceilings in the child's private engine cache.

        Copies, not a bind: the child may write ceilings of its own, which no other child
        then reads (a shared writable cache could be poisoned).
        """
        folder = EngineSettings().cache_root() / "ceilings"
        try:
            files = sorted(folder.glob("*.json"))[:_MAX_CEILING_FILES]
        except OSError:
            files = []
        target = view.ENGINE_CACHE / "ceilings"
        args = ["--dir", str(target)]
        for index, path in enumerate(files):
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue
            fds[f"ceiling{index}"] = fd
            args += ["--file", str(fd), str(target / path.name)]
        return args

    # ------------------------------------------------------------ starting

    def start(
        self, argv: Sequence[str], *, env: Mapping[str, str], output: IO[bytes], cwd: Path,
        pass_fds: Sequence[int], gpu: bool = True, binds: Sequence[Path] = (),
        readonly: Sequence[Path] = (),
    ) -> Box:  # fmt: skip
        """Start `argv` in a new sandbox; `cwd` is the host folder bubblewrap starts in."""
        fds: dict[str, int] = {}
        cgroup: BoxCgroup | None = None
        info_read = -1
        try:
            if self.status.seccomp:
                fds["seccomp"] = program_fd()
            info_read, fds["info"] = os.pipe2(os.O_CLOEXEC)
            command = [*self.arguments(env, fds, gpu, binds, readonly), *argv]
            if self.cgroup_base is not None:
                cgroup = BoxCgroup(self.cgroup_base, self.config.max_tasks)
                # The shell joins the cgroup, then becomes bubblewrap: nothing escapes it.
                join = 'echo $$ > "$0" && exec "$@"'
                command = ["/bin/sh", "-c", join, str(cgroup.procs_file), *command]
            popen = functools.partial(
                subprocess.Popen,
                command,
                cwd=cwd,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                pass_fds=(*pass_fds, *fds.values()),
                start_new_session=True,
            )
            proc = _spawner().submit(popen).result()
        except BaseException:
            if cgroup is not None:
                cgroup.remove()
            raise
        finally:
            for fd in fds.values():
                os.close(fd)
        try:
            info = _read_info(info_read)
        finally:
            os.close(info_read)
        namespace = info.get("pid-namespace")
        return Box(
            proc,
            namespace=f"pid:[{namespace}]" if namespace else "pid:[unknown]",
            init_pid=info.get("child-pid"),
            cgroup=cgroup,
        )


_spawners: dict[int, ThreadPoolExecutor] = {}
_spawners_lock = threading.Lock()


def _spawner() -> ThreadPoolExecutor:
    """The one thread of this process that starts every sandbox.

    bubblewrap's --die-with-parent is the kernel's parent-death signal, which fires when
    the *thread* that started the process ends, not the process: a sandbox started from
    a pool's short-lived start-up thread would be killed as that thread returned. This
    thread lives as long as the process (a new one after a fork).
    """
    with _spawners_lock:
        pid = os.getpid()
        if pid not in _spawners:
            _spawners.clear()
            _spawners[pid] = ThreadPoolExecutor(1, thread_name_prefix="kplay-sandbox-spawner")
        return _spawners[pid]


def _read_info(fd: int) -> dict[str, int]:
    """bubblewrap's --info-fd JSON ({"child-pid": ..., "pid-namespace": ...}), or {}."""
    data = b""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP)
    while poller.poll(int(_INFO_TIMEOUT_S * 1000)):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        info = json.loads(data or b"{}")
    except ValueError:
        return {}
    return info if isinstance(info, dict) else {}


# ---------------------------------------------------------------- finding out


def prepare(config: SandboxConfig | None = None) -> tuple[Sandbox | None, SandboxStatus]:
    """The sandbox a pool uses, or None; and its status. Logs the outcome.

    Raises SandboxUnavailable where `required` cannot be met.
    """
    config = config or SandboxConfig.from_settings()
    probed, features = _probe(config)
    status = probed.model_copy(deep=True)  # the probe's own stays as found, for later pools
    if config.mode == "required" and not (status.active and status.seccomp):
        raise SandboxUnavailable(
            f"KPLAY_SANDBOX=required, but {status.summary()}; install bubblewrap and allow "
            "unprivileged user namespaces, or set KPLAY_SANDBOX=auto"
        )
    if status.active:
        log.info(status.summary())
        return Sandbox(config, status, features), status
    (log.info if config.mode == "off" else log.warning)(status.summary())
    return None, status


@functools.cache
def _probe(config: SandboxConfig) -> tuple[SandboxStatus, _Features]:
    """Whether bubblewrap runs a child here (the same view, a trivial command); once per
    configuration in a process."""
    status = SandboxStatus(mode=config.mode)
    if config.mode == "off":
        status.notes.append("switched off (KPLAY_SANDBOX=off)")
        return status, _Features()
    found = str(config.bwrap) if config.bwrap else shutil.which("bwrap")
    if not found or not os.access(found, os.X_OK):
        status.notes.append(f"no bubblewrap at {config.bwrap or 'bwrap on PATH'}")
        return status, _Features()
    status.bwrap = found
    features = _features(found, status)
    try:
        filter_program()
        status.seccomp = True
    except SeccompUnavailable as exc:
        status.notes.append(f"no seccomp filter: {exc}")
    try:
        status.cgroup = str(find_base(config.cgroup))
    except (CgroupUnavailable, OSError) as exc:
        status.notes.append(f"no cgroup (memory watchdog and RLIMIT_NPROC only): {exc}")
    trial = Sandbox(config, status, features)
    try:
        status.active = _trial(trial)
    finally:
        trial.close()
    return status, features


def _features(bwrap: str, status: SandboxStatus) -> _Features:
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=10)
        helptext = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        status.notes.append(f"bubblewrap does not run: {exc}")
        return _Features()
    status.version = version.stdout.strip() or None
    text = helptext.stdout + helptext.stderr
    features = _Features(size="--size" in text, disable_userns="--disable-userns" in text)
    if not features.size:
        status.notes.append("this bubblewrap cannot bound the size of /tmp (--size)")
    return features


def _trial(sandbox: Sandbox) -> bool:
    """Run Python in the sandbox once; False (and a note) where it cannot start."""
    env = sandbox.child_env(Limits())
    code = "import kplay.workers.limits"
    try:
        with tempfile.TemporaryFile() as out:
            box = sandbox.start(
                [sys.executable, "-P", "-s", "-c", code],
                env=env, output=out, cwd=Path(tempfile.gettempdir()), pass_fds=(),
            )  # fmt: skip
            try:
                code_ = box.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                box.kill()
                box.proc.wait()
                code_ = None
            finally:
                box.close()
            out.seek(0)
            said = out.read()[-600:].decode(errors="replace").strip()
    except OSError as exc:
        sandbox.status.notes.append(f"bubblewrap could not be started: {exc}")
        return False
    if code_ != 0:
        with contextlib.suppress(Exception):
            said = said.splitlines()[-1]
        sandbox.status.notes.append(f"bubblewrap cannot run a child here ({said or code_})")
        return False
    return True
