"""Building a CUTLASS C++ cell: nvcc against the CUTLASS/CuTe headers, one cached call.

The headers come from the `nvidia-cutlass` wheel (its `cutlass_library` package ships
`source/include` and `source/tools/util/include`), or from a folder named by
KPLAY_ENGINE_CUTLASS_INCLUDE. NVRTC cannot take them: its built-in CCCL headers clash
with the ones CUTLASS includes, so nvcc builds what runs. One call gives the cubin, the
PTX, the SASS and the resource report (`-cubin -Xptxas -v -keep`); the result is kept on
disk under a hash of everything that decides it (source, kernel name, arch, nvcc and its
version, the headers and their version, the flags), since nvcc on these headers takes
seconds to a minute.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from kplay.kernels.backends.cuda_report import _ptx_parameters
from kplay.kernels.backends.cuda_source import (
    kernel_base_name,
    kernel_name_problem,
    kernel_parameters,
    not_found_message,
)
from kplay.kernels.backends.toolkit_find import tool_version
from kplay.kernels.backends.toolkit_parse import ptx_entry_params
from kplay.kernels.backends.toolkit_run import KERNEL_FILE, RunningTool, demangle, finish_nvcc
from kplay.kernels.models import CompileStage, Diagnostic

_CACHE_FORMAT = "2"  # 2: SASS line comments compacted (kernels.backends.toolkit_run)
# -O3 is nvcc's device default already; said here so that the cache key names it.
FLAGS = (
    "-std=c++17", "--expt-relaxed-constexpr", "-O3", "-lineinfo",
    "-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", ".",
)  # fmt: skip


def cutlass_settings() -> tuple[Path | None, float]:
    """(include folder, nvcc timeout) from KPLAY_ENGINE_CUTLASS_INCLUDE and
    KPLAY_ENGINE_CUTLASS_NVCC_TIMEOUT_S (engine settings reach the sandboxed box too)."""
    from kplay.config import EngineSettings

    settings = EngineSettings()
    return settings.engine_cutlass_include, settings.engine_cutlass_nvcc_timeout_s


@dataclass(frozen=True)
class Headers:
    include: Path  # holds cute/ and cutlass/
    util: Path | None  # tools/util/include: cutlass/util/*.h
    version: str  # "4.2.0"

    def flags(self) -> list[str]:
        return [f"-I{p}" for p in (self.include, self.util) if p is not None]


@lru_cache(maxsize=4)
def _headers_at(include: Path) -> Headers | None:
    if not (include / "cute" / "tensor.hpp").is_file():
        return None
    util = include.parent / "tools" / "util" / "include"
    return Headers(include, util if util.is_dir() else None, _version(include))


def find_headers() -> Headers | None:
    """The CUTLASS headers this host has: the setting's folder, else the wheel's."""
    chosen, _ = cutlass_settings()
    if chosen is not None:
        return _headers_at(Path(chosen).resolve())
    try:
        spec = importlib.util.find_spec("cutlass_library")  # located, never imported
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(next(iter(spec.submodule_search_locations)))
    return _headers_at((root / "source" / "include").resolve())


def _version(include: Path) -> str:
    try:
        text = (include / "cutlass" / "version.h").read_text(errors="replace")
    except OSError:
        return "?"
    parts = [
        re.search(rf"#define\s+CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")
    ]
    return ".".join(m.group(1) for m in parts if m) or "?"


@dataclass
class Build:
    """What one nvcc call made: the stage (report, listings) and, when it compiled, the image."""

    stage: CompileStage
    image: bytes | None = None
    entry: str | None = None  # the symbol to launch: as written, or mangled
    params: list[str] | None = None


def build_key(source: str, kernel_name: str, arch: str, nvcc: Path, headers: Headers) -> str:
    digest = hashlib.sha256()
    parts = (
        _CACHE_FORMAT, source, kernel_name, arch, str(nvcc), tool_version(nvcc) or "",
        str(headers.include), headers.version, " ".join(FLAGS),
    )  # fmt: skip
    for part in parts:
        digest.update(part.encode() + b"\0")
    return digest.hexdigest()


def build(
    source: str,
    kernel_name: str,
    arch: str,
    *,
    nvcc: Path,
    headers: Headers,
    workdir: Path,
    cache_dir: Path,
    timeout_s: float,
) -> Build:
    """Compile `source` to a cubin for `arch` (from the cache when it was built before)."""
    key = build_key(source, kernel_name, arch, nvcc, headers)
    cached = _load(cache_dir / key)
    if cached is not None:
        return cached
    folder = (workdir / "nvcc-cutlass").resolve()
    folder.mkdir(parents=True, exist_ok=True)
    # A host-side reference makes nvcc instantiate a templated kernel; it sits past the
    # learner's last line, so line numbers in diagnostics stay the learner's.
    reference = f"\nvoid* kplay_kernel_reference_ = (void*)&{kernel_name};\n"
    (folder / KERNEL_FILE).write_text(source.rstrip("\n") + "\n" + reference)
    cmd = [str(nvcc), f"-arch={arch}", *FLAGS, *headers.flags(), "-o", "kernel.cubin", KERNEL_FILE]
    try:
        running = RunningTool(cmd, folder, timeout_s, "nvcc.log")
    except OSError as exc:
        diag = Diagnostic(message=f"could not start nvcc: {exc}")
        return Build(CompileStage(ok=False, log=str(exc), diagnostics=[diag]))
    base = kernel_base_name(kernel_name)
    stage = finish_nvcc(running, folder, source, base, kernel_name_problem(kernel_name))
    stage.log = stage.log.replace(f"{headers.include}/", "cutlass/include/")
    stage.compiler = f"{stage.compiler} + CUTLASS {headers.version}"
    if any("did not finish" in d.message for d in stage.diagnostics):
        return Build(stage)  # a slow machine's verdict: never cached
    result = Build(stage)
    if stage.ok:
        result = _finish(stage, folder, source, kernel_name)
    _store(cache_dir / key, result)
    return result


def _finish(stage: CompileStage, folder: Path, source: str, kernel_name: str) -> Build:
    try:
        ptx = (folder / "kernel.ptx").read_text(errors="replace")
        image = (folder / "kernel.cubin").read_bytes()
    except OSError as exc:
        stage.ok = False
        stage.diagnostics.append(Diagnostic(message=f"nvcc left no cubin or PTX: {exc}"))
        return Build(stage)
    entry = find_entry(ptx, kernel_name)
    if entry is None:
        message = not_found_message(kernel_name)
        stage.ok = False
        stage.diagnostics.append(Diagnostic(message=message))
        return Build(stage)
    params = kernel_parameters(source, kernel_name) or _ptx_parameters(ptx, kernel_name)
    return Build(stage, image, entry, params)


def find_entry(ptx: str, kernel_name: str) -> str | None:
    """The `.entry` symbol of `kernel_name` in a module: the name itself for an extern "C"
    kernel, else the mangled instance whose readable name is the one asked for."""
    entries = list(ptx_entry_params(ptx))
    base = kernel_base_name(kernel_name)
    if base in entries and "<" not in kernel_name:
        return base
    mangled = [e for e in entries if e.startswith(f"_Z{len(base)}{base}")]
    mangled += [e for e in entries if e.startswith("_ZN") and f"{len(base)}{base}" in e]
    if not mangled:
        return None
    wanted = re.sub(r"\s+", "", kernel_name)
    readable = demangle(mangled)
    for symbol in mangled:
        name = readable.get(symbol, "").split("(", 1)[0].removeprefix("void ")
        if re.sub(r"\s+", "", name) == wanted:
            return symbol
    return mangled[0] if len(set(mangled)) == 1 else None


# ---------------------------------------------------------------- the cache


def _load(folder: Path) -> Build | None:
    try:
        stage = CompileStage.model_validate_json((folder / "stage.json").read_text())
        meta = json.loads((folder / "meta.json").read_text())
        image = (folder / "kernel.cubin").read_bytes() if meta.get("entry") else None
    except (OSError, ValueError):
        return None
    params = meta.get("params")
    return Build(stage, image, meta.get("entry"), params if isinstance(params, list) else None)


def _store(folder: Path, result: Build) -> None:
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    try:
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "stage.json").write_text(result.stage.model_dump_json())
        if result.image is not None:
            (tmp / "kernel.cubin").write_bytes(result.image)
        meta = {"entry": result.entry if result.image else None, "params": result.params}
        (tmp / "meta.json").write_text(json.dumps(meta))
        os.replace(tmp, folder)
    except OSError:
        pass  # a read-only cache, or another process stored it first: costs speed only
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
