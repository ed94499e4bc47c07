"""What a sandboxed child sees of the host's file system, as bubblewrap arguments.

Read-only: the system's programs and libraries (/usr and the /bin, /sbin, /lib* links
into it), the Python installation and virtual environment, the `kplay` package, what
the operator points the engine at (PYTHONPATH, CUDA_HOME, LD_LIBRARY_PATH, extra problem
folders, KPLAY_SANDBOX_RO_PATHS), a handful of /etc files and the device part of /sys.
Synthetic /etc/passwd and /etc/group name the sandbox's one user. Nothing else: no home
folders, no /var, /root, /srv, data folders, the host's /tmp or the host's /proc.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from kplay.config import EngineSettings

UID = GID = 1000
USER = "learner"
# Inside the sandbox: a private tmpfs at /tmp holds the home (cwd, TMPDIR) and the caches.
TMP = Path("/tmp")
HOME = TMP / "home"
CACHE = TMP / "cache"
ENGINE_CACHE = CACHE / "engine"

SYSTEM_LINKS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# The /etc a compiler, the dynamic loader and Python need; nothing with a secret in it.
ETC_FILES = (
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "alternatives",  # /usr/bin/cc -> /etc/alternatives/cc -> gcc, which Triton calls
    "localtime",
    "timezone",
    "os-release",
    "nsswitch.conf",
)
# The device part of /sys: CPU topology, PCI devices and driver modules, which CUDA,
# Numba and PyTorch read. /sys/fs (cgroups), /sys/kernel and /sys/firmware stay hidden.
SYS_PARTS = ("devices", "bus", "class", "dev", "module")
# Never bound from the host, whatever a setting says: they would hide the sandbox's own.
_RESERVED = (Path("/"), Path("/proc"), Path("/dev"), Path("/sys"), TMP)


def python_paths() -> list[Path]:
    """The interpreter, its standard library, the environment's packages and `kplay`."""
    paths = {Path(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)}
    paths.add(Path(os.path.realpath(sys.executable)).parent)
    paths.update(Path(p) for p in site.getsitepackages())
    cwd = os.getcwd()
    paths.update(Path(p) for p in sys.path if p and os.path.isabs(p) and p != cwd)
    for name in ("kplay", "kplay.kernels", "kplay.workers"):
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations:
            paths.update(Path(p) for p in spec.submodule_search_locations)
    return sorted(paths)


def operator_paths(env: Mapping[str, str], extra: Iterable[Path] = ()) -> list[Path]:
    """Folders the child's environment and the engine's settings point at."""
    paths = [Path(p) for name in ("PYTHONPATH", "LD_LIBRARY_PATH") for p in _split(env, name)]
    paths += [Path(env[name]) for name in ("CUDA_HOME", "CUDA_PATH") if env.get(name)]
    engine = EngineSettings()
    paths += engine.extra_problem_dirs
    if engine.cuda_include is not None:
        paths.append(engine.cuda_include)
    paths += list(extra)
    return paths


def _split(env: Mapping[str, str], name: str) -> list[str]:
    return [p for p in env.get(name, "").split(os.pathsep) if p]


def resolved_existing(paths: Iterable[Path]) -> list[Path]:
    """The existing ones of `paths`, resolved, once each."""
    return sorted({Path(os.path.realpath(p)) for p in paths if os.path.exists(p)})


def outermost(paths: Iterable[Path]) -> list[Path]:
    """Existing, resolved paths, without those inside another one of the list."""
    real = resolved_existing(paths)
    kept: list[Path] = []
    for path in real:
        if any(path.is_relative_to(k) for k in kept):
            continue
        kept.append(path)
    return kept


def readonly_args(paths: Iterable[Path]) -> tuple[list[str], list[str]]:
    """(--ro-bind arguments, notes on paths refused) for host folders shown as they are.

    A path that is a symlink is bound at its target and linked where it was named.
    """
    args: list[str] = []
    notes: list[str] = []
    named = list(paths)
    allowed = []
    for path in resolved_existing(named):
        if any(r.is_relative_to(path) for r in _RESERVED) or _under_reserved(path):
            notes.append(f"{path} is not shown read-only in the sandbox (it would cover its own)")
        else:
            allowed.append(path)
    for path in outermost(allowed):
        args += ["--ro-bind", str(path), str(path)]
    kept = [Path(a) for a in args[1::3]]
    for path in named:
        if path.is_symlink() and not any(path.is_relative_to(k) for k in kept):
            args += ["--symlink", os.readlink(path), str(path)]
    return args, notes


def _under_reserved(path: Path) -> bool:
    return any(path.is_relative_to(r) for r in (Path("/proc"), Path("/dev"), Path("/sys")))


def system_args(root: Path = Path("/")) -> list[str]:
    """/usr, the /bin and /lib links (or folders), the /etc files and /sys parts."""
    args = ["--ro-bind", str(root / "usr"), "/usr"]
    for name in SYSTEM_LINKS:
        path = root / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), f"/{name}"]
        elif path.is_dir():
            args += ["--ro-bind", str(path), f"/{name}"]
    for name in ETC_FILES:
        args += ["--ro-bind-try", str(root / "etc" / name), f"/etc/{name}"]
    for name in SYS_PARTS:
        args += ["--ro-bind-try", str(root / "sys" / name), f"/sys/{name}"]
    return args


def identity_files(folder: Path) -> list[str]:
    """Write passwd and group naming only the sandbox's user; arguments that show them."""
    (folder / "passwd").write_text(
        f"{USER}:x:{UID}:{GID}:kernel playground learner:{HOME}:/usr/sbin/nologin\n"
    )
    (folder / "group").write_text(f"{USER}:x:{GID}:\n")
    return [
        *("--ro-bind", str(folder / "passwd"), "/etc/passwd"),
        *("--ro-bind", str(folder / "group"), "/etc/group"),
    ]


# ---------------------------------------------------------------- GPUs


def gpu_nodes(
    visible: str | None,
    dev: Path = Path("/dev"),
    driver: Path = Path("/proc/driver/nvidia/gpus"),
) -> list[Path]:
    """The NVIDIA device files a child with this CUDA_VISIBLE_DEVICES needs, where present.

    CUDA names GPUs by index (in PCI bus order with CUDA_DEVICE_ORDER=PCI_BUS_ID, which
    the worker plan sets) or by UUID; the device file is named by the driver's minor
    number, read from /proc/driver/nvidia/gpus/<bus id>/information. Without that file an
    index is taken for the minor number.
    """
    nodes = [dev / n for n in ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")]
    every = sorted(dev.glob("nvidia[0-9]*"), key=lambda p: int(p.name[6:]))
    if visible is None:
        chosen = every
    elif any(e.strip().startswith("MIG-") for e in visible.split(",")):
        chosen = [*every, dev / "nvidia-caps"]  # MIG instances reach their GPU through caps
    else:
        chosen = [dev / f"nvidia{m}" for m in _visible_minors(visible, driver)]
    return [p for p in [*nodes, *chosen] if p.exists()]


def _visible_minors(visible: str, driver: Path) -> list[int]:
    gpus = _driver_gpus(driver)
    minors = []
    for entry in (e.strip() for e in visible.split(",")):
        if entry.isdigit():
            index = int(entry)
            if gpus:
                if index >= len(gpus):
                    break  # CUDA stops at the first entry that names no device
                minors.append(gpus[index][1])
            else:
                minors.append(index)
        elif entry.startswith("GPU-"):
            found = [minor for uuid, minor in gpus if uuid.startswith(entry)]
            if not found:
                break
            minors.append(found[0])
        else:
            break
    return minors


def _driver_gpus(driver: Path) -> list[tuple[str, int]]:
    """(UUID, minor number) of each GPU the driver lists, in PCI bus order."""
    found = []
    try:
        folders = sorted(driver.iterdir())
    except OSError:
        return []
    for folder in folders:
        facts = {}
        try:
            for line in (folder / "information").read_text().splitlines():
                key, _, value = line.partition(":")
                facts[key.strip()] = value.strip()
            found.append((facts.get("GPU UUID", ""), int(facts["Device Minor"])))
        except (OSError, KeyError, ValueError):
            return []
    return found
