"""Finding NVIDIA's command-line tools and the CUDA headers.

The CUDA backend needs nvcc (with its ptxas) for the resource report and PTX, nvdisasm
or cuobjdump for SASS, and the toolkit's include folder for NVRTC. They may come from a
system toolkit or from pip wheels (nvidia-cuda-nvcc, nvidia-cuda-nvdisasm), whose
layout differs between CUDA 12 (`nvidia/cuda_nvcc/bin`) and CUDA 13 (`nvidia/cu13/bin`),
so every lookup walks the same ordered list of places. Running the tools is
`toolkit_run`'s job; reading what they print, `toolkit_parse`'s.
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from functools import lru_cache
from pathlib import Path


def _site_dirs() -> list[Path]:
    dirs: list[str] = []
    try:
        dirs.extend(site.getsitepackages())
    except AttributeError:  # pragma: no cover - some embedded interpreters lack it
        pass
    dirs.append(site.getusersitepackages())
    dirs.extend(p for p in sys.path if p)
    seen: list[Path] = []
    for d in dirs:
        path = Path(d)
        if path not in seen and (path / "nvidia").is_dir():
            seen.append(path)
    return seen


def pip_cuda_roots() -> list[Path]:
    """Folders such as site-packages/nvidia/cu13, newest CUDA first."""
    roots: list[Path] = []
    for sp in _site_dirs():
        roots.extend(p for p in (sp / "nvidia").iterdir() if p.is_dir())

    def newest_first(root: Path) -> tuple[int, str]:
        number = root.name.removeprefix("cu")
        return (int(number) if number.isdigit() else 0), root.name

    return sorted(roots, key=newest_first, reverse=True)


def _toolkit_dirs() -> list[Path]:
    dirs = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    dirs.append(Path("/usr/local/cuda"))
    return dirs


def find_tool(name: str, near: Path | None = None) -> Path | None:
    """Where `name` lives: next to `near`, on PATH, in a toolkit, or in a pip wheel."""
    candidates: list[Path] = []
    if near is not None:
        candidates.append(near.parent / name)
    on_path = shutil.which(name)
    if on_path:
        candidates.append(Path(on_path))
    candidates.extend(d / "bin" / name for d in _toolkit_dirs())
    candidates.extend(r / "bin" / name for r in pip_cuda_roots())
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    return None


@lru_cache(maxsize=16)
def tool_version(path: Path) -> str | None:
    """'13.0' from `nvcc --version` (same wording for nvdisasm, cuobjdump, ptxas)."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=20, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"release (\d+\.\d+)", out)
    return match.group(1) if match else None


def host_compiler() -> str | None:
    """nvcc preprocesses with the host compiler even for device-only output."""
    for name in ("g++", "gcc", "c++"):
        found = shutil.which(name)
        if found:
            return found
    return None


@lru_cache(maxsize=16)
def header_version(include: Path) -> tuple[int, int] | None:
    """The CUDA version an include folder belongs to, from cuda.h or cuda_runtime_api.h."""
    for header, macro in (("cuda.h", "CUDA_VERSION"), ("cuda_runtime_api.h", "CUDART_VERSION")):
        try:
            text = (include / header).read_text(errors="replace")
        except OSError:
            continue
        match = re.search(rf"#define\s+{macro}\s+(\d+)", text)
        if match:
            value = int(match.group(1))
            return value // 1000, (value % 1000) // 10
    return None


def find_cuda_include(
    nvrtc_version: tuple[int, int] | None = None, nvcc: Path | None = None
) -> Path | None:
    """A CUDA include folder holding mma.h, preferring one of NVRTC's own version.

    NVRTC carries cuda_fp16.h and friends built in, but not mma.h; headers from another
    CUDA release can clash with the built-in ones, hence the preference.
    """
    from kplay.config import EngineSettings

    include = EngineSettings().cuda_include
    if include is not None:
        return include
    places = [r / "include" for r in pip_cuda_roots()]
    places += [d / "include" for d in _toolkit_dirs()]
    if nvcc is not None:
        places.append(nvcc.resolve().parent.parent / "include")
    # Split pip wheels may ship mma.h without the crt/mma.h it includes.
    found = [p for p in dict.fromkeys(places) if (p / "crt" / "mma.h").is_file()]
    if not found:
        return None
    if nvrtc_version is None:
        return found[0]

    def rank(include: Path) -> int:
        version = header_version(include)
        if version == nvrtc_version:
            return 0
        if version is not None and version[0] == nvrtc_version[0]:
            return 1 if version < nvrtc_version else 2
        return 3

    return min(found, key=rank)
