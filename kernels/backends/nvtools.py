"""Finding and running NVIDIA's command-line tools, and reading what they print.

The CUDA backend needs nvcc (with its ptxas) for the resource report and PTX, nvdisasm
or cuobjdump for SASS, and the toolkit's include folder for NVRTC. They may come from a
system toolkit or from pip wheels (nvidia-cuda-nvcc, nvidia-cuda-nvdisasm), whose
layout differs between CUDA 12 (`nvidia/cuda_nvcc/bin`) and CUDA 13 (`nvidia/cu13/bin`),
so every lookup walks the same ordered list of places.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import site
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from kplay.kernels.models import CompileStage, Diagnostic, Resources

KERNEL_FILE = "kernel.cu"
TEXT_LIMIT_BYTES = 200_000
# -keep leaves the PTX beside the cubin: PTX, SASS and ptxas -v from one nvcc call.
NVCC_FLAGS = ("-std=c++17", "-lineinfo", "-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", ".")

# ---------------------------------------------------------------- finding tools


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


# ---------------------------------------------------------------- running tools


@dataclass
class ToolResult:
    returncode: int | None
    output: str
    duration_ms: float
    timed_out: bool = False


class RunningTool:
    """A tool started in its own process group, its output going to a file.

    A file rather than a pipe, so that a long log never blocks the tool while the
    caller does other work (the NVRTC compile) before collecting it.
    """

    def __init__(self, cmd: list[str], cwd: Path, timeout_s: float, log_name: str) -> None:
        self.cmd = cmd
        self.timeout_s = timeout_s
        self._log_path = cwd / log_name
        self._started = time.perf_counter()
        env = {**os.environ, "LC_ALL": "C"}
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(
                cmd,
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )

    def wait(self) -> ToolResult:
        remaining = self.timeout_s - (time.perf_counter() - self._started)
        timed_out = False
        try:
            self._proc.wait(timeout=max(remaining, 0.01))
        except subprocess.TimeoutExpired:
            timed_out = True
            self._kill()
        elapsed = (time.perf_counter() - self._started) * 1000
        output = self._log_path.read_text(errors="replace")
        return ToolResult(self._proc.returncode, output, elapsed, timed_out)

    def _kill(self) -> None:
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self._proc.wait()


def run_tool(cmd: list[str], cwd: Path, timeout_s: float, log_name: str) -> ToolResult:
    try:
        return RunningTool(cmd, cwd, timeout_s, log_name).wait()
    except OSError as exc:
        return ToolResult(None, f"could not start {cmd[0]}: {exc}", 0.0)


# ---------------------------------------------------------------- compiler messages

# EDG front end (nvcc and NVRTC): kernel.cu(12): error: identifier "x" is undefined
_EDG = re.compile(
    r"^(?P<file>[^\s(][^()]*?)\((?P<line>\d+)\): "
    r"(?P<sev>catastrophic error|fatal error|error|warning|remark|note)(?: #[\w-]+)?: "
    r"(?P<msg>.*)$"
)
# Host preprocessor (gcc), e.g. a missing header: kernel.cu:3:10: fatal error: x.h: ...
_GCC = re.compile(
    r"^(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): "
    r"(?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
# Tools without a source position: ptxas error : ..., nvcc fatal : ...
_TOOL = re.compile(r"^(?P<tool>ptxas|nvcc|nvlink)\s+(?P<sev>error|fatal|warning)\s*: (?P<msg>.*)$")
_HEADER_SUFFIXES = (".h", ".hpp", ".cuh", ".hxx", ".inl")


Severity = Literal["error", "warning", "note"]


def _severity(word: str) -> Severity:
    if "error" in word or word == "fatal":
        return "error"
    return "warning" if word == "warning" else "note"


def _caret_column(lines: list[str], at: int, source_line: str) -> int | None:
    """EDG echoes the offending line (two spaces in) and puts a caret under the spot."""
    if at + 2 >= len(lines):
        return None
    echo, caret = lines[at + 1], lines[at + 2]
    if echo.rstrip() != "  " + source_line.rstrip() or caret.strip() != "^":
        return None
    return caret.index("^") - 1


def parse_diagnostics(
    log: str, source: str, about_kernel: Callable[[str], str] | None = None
) -> tuple[list[Diagnostic], set[str]]:
    """Diagnostics whose lines refer to the learner's source, and the main file's names.

    Errors in code the learner did not write (the reference nvcc gets appended past the
    last line, NVRTC's `__nv_name_map` for the name expression) concern the kernel's
    name: the first becomes one diagnostic worded by `about_kernel`, the rest are dropped.
    """
    src_lines = source.splitlines()
    log_lines = log.splitlines()
    out: list[Diagnostic] = []
    main_files: set[str] = set()
    named_kernel = False
    for i, text in enumerate(log_lines):
        text = text.rstrip()
        if "detected during" in text and out:
            out[-1].message += "; " + text.strip()
            continue
        match = _EDG.match(text) or _GCC.match(text)
        tool = _TOOL.match(text)
        if match and _is_kernel_reference(match, len(src_lines)):
            if about_kernel and not named_kernel and _severity(match["sev"]) == "error":
                out.append(Diagnostic(message=about_kernel(match["msg"])))
                named_kernel = True
        elif match:
            diag = _positioned(match, src_lines, log_lines, i, main_files)
            if diag not in out:
                out.append(diag)
        elif tool:
            sev = _severity(tool["sev"])
            out.append(Diagnostic(severity=sev, message=f"{tool['tool']}: {tool['msg']}"))
    return out, main_files


def _is_main(file: str) -> bool:
    return file.endswith((".cu", ".cpp", ".cc")) and not file.endswith(_HEADER_SUFFIXES)


def _is_kernel_reference(match: re.Match[str], source_lines: int) -> bool:
    if match["file"].startswith("__nv_name_map"):
        return True
    return _is_main(match["file"]) and int(match["line"]) > source_lines


def _positioned(
    match: re.Match[str], src_lines: list[str], log_lines: list[str], at: int, mains: set[str]
) -> Diagnostic:
    file, line, sev = match["file"], int(match["line"]), _severity(match["sev"])
    if not _is_main(file):
        return Diagnostic(severity=sev, message=f"{Path(file).name}({line}): {match['msg']}")
    mains.add(file)
    column: int | None
    if match.groupdict().get("col"):
        column = int(match["col"])
    else:
        column = _caret_column(log_lines, at, src_lines[line - 1])
    return Diagnostic(line=line, column=column, severity=sev, message=match["msg"])


# ---------------------------------------------------------------- ptxas -v

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[\d+\]")


def parse_ptxas(log: str) -> list[Resources]:
    """One Resources per entry function from `ptxas -v` output (mangled names)."""
    found: list[Resources] = []
    current: Resources | None = None
    props_for: str | None = None
    for line in log.splitlines():
        if entry := _ENTRY.search(line):
            current = Resources(kernel=entry[1], arch=entry[2])
            found.append(current)
            props_for = None
        elif props := _PROPS.search(line):
            props_for = props[1]
        elif (frame := _FRAME.search(line)) and current is not None:
            if props_for == current.kernel:
                current.stack_frame_bytes = int(frame[1])
                current.spill_stores_bytes = int(frame[2])
                current.spill_loads_bytes = int(frame[3])
        elif (used := _USED.search(line)) and current is not None:
            current.registers = int(used[1])
            current.shared_bytes = sum(int(m) for m in _SMEM.findall(line))
            cmem = _CMEM.findall(line)
            if cmem:
                current.constant_bytes = sum(int(m) for m in cmem)
    return found


def demangle(names: list[str]) -> dict[str, str]:
    """Readable names for mangled C++ symbols, through cu++filt or c++filt when present."""
    mangled = [n for n in names if n.startswith("_Z")]
    # c++filt writes templates as the learner does (tile<128>, not tile<(int)128>).
    tool = find_tool("c++filt") or find_tool("cu++filt")
    if not mangled or tool is None:
        return {}
    try:
        out = subprocess.run(
            [str(tool), *mangled], capture_output=True, text=True, timeout=10, check=False
        ).stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {}
    if len(out) != len(mangled):
        return {}
    return {m: d.strip() for m, d in zip(mangled, out, strict=True) if d.strip()}


# ---------------------------------------------------------------- PTX and text

_PTX_ENTRY = re.compile(r"\.entry\s+([\w$.]+)\s*\(([^)]*)\)", re.S)


def ptx_entry_params(ptx: str) -> dict[str, int]:
    """Number of parameters of each `.entry` in a PTX module (mangled name -> count)."""
    return {m[1]: m[2].count(".param") for m in _PTX_ENTRY.finditer(ptx)}


def truncate(text: str, limit_bytes: int, what: str) -> str:
    """Keep the first `limit_bytes` of a listing, cut at a line end, and say so."""
    data = text.encode()
    if len(data) <= limit_bytes:
        return text
    head = data[:limit_bytes].decode(errors="ignore")
    head = head[: head.rfind("\n") + 1] or head
    return (
        f"{head}\n// [{what} truncated: showing the first {limit_bytes // 1000} KB "
        f"of {len(data) // 1000} KB]\n"
    )


# ---------------------------------------------------------------- the nvcc report


def start_nvcc(nvcc: Path, source: str, arch: str, folder: Path, timeout_s: float) -> RunningTool:
    """Start `nvcc -cubin -Xptxas -v` on `source` inside `folder` (raises OSError)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / KERNEL_FILE).write_text(source)
    cmd = [str(nvcc), f"-arch={arch}", *NVCC_FLAGS, "-o", "kernel.cubin", KERNEL_FILE]
    return RunningTool(cmd, folder, timeout_s, "nvcc.log")


def finish_nvcc(
    running: RunningTool,
    folder: Path,
    source: str,
    kernel_base: str,
    about_kernel: Callable[[str], str],
) -> CompileStage:
    """Wait for nvcc; diagnostics, resources (launched kernel first), PTX and SASS."""
    result = running.wait()
    arch = running.cmd[1].removeprefix("-arch=")
    compiler = f"nvcc {tool_version(Path(running.cmd[0])) or '?'} ({arch})"
    if result.timed_out:
        diag = Diagnostic(message=f"nvcc did not finish within {running.timeout_s:g} s")
        return CompileStage(ok=False, log=result.output, diagnostics=[diag], compiler=compiler)
    log = result.output.replace(f"{folder}/", "")
    diags, _ = parse_diagnostics(log, source, about_kernel)
    ok = result.returncode == 0
    if not ok and not any(d.severity == "error" for d in diags):
        diags.append(Diagnostic(message=f"nvcc failed (exit status {result.returncode})"))
    stage = CompileStage(ok=ok, log=log, diagnostics=diags, compiler=compiler)
    if ok:
        stage.resources = _ordered(parse_ptxas(log), kernel_base)
        stage.ptx = _listing(folder / "kernel.ptx", folder, "PTX")
        stage.sass = disassemble(folder, Path(running.cmd[0]))
    stage.duration_ms = result.duration_ms
    return stage


def disassemble(folder: Path, nvcc: Path | None) -> str | None:
    """SASS of folder/kernel.cubin. nvdisasm first: it marks each instruction's source line."""
    for name, args in (("nvdisasm", ["-c", "-g"]), ("cuobjdump", ["-sass"])):
        tool = find_tool(name, near=nvcc)
        if tool is None:
            continue
        result = run_tool([str(tool), *args, "kernel.cubin"], folder, 60, f"{name}.log")
        if result.returncode == 0 and result.output.strip():
            return _listing(folder / f"{name}.log", folder, "SASS")
    return None


def _listing(path: Path, folder: Path, what: str) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    # Paths of the private work folder mean nothing to a reader, and would spoil the cache.
    return truncate(text.replace(f"{folder}/", ""), TEXT_LIMIT_BYTES, what)


def _ordered(found: list[Resources], kernel_base: str) -> list[Resources]:
    """Readable names, the launched kernel first."""
    names = demangle([r.kernel for r in found if r.kernel])
    for res in found:
        res.kernel = names.get(res.kernel or "", res.kernel)
    pattern = re.compile(rf"(^|[\s:]){re.escape(kernel_base)}\s*[<(]")

    def rank(res: Resources) -> int:
        name = res.kernel or ""
        return 0 if name == kernel_base or pattern.search(name) else 1

    return sorted(found, key=rank)
