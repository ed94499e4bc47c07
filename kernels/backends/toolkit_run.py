"""Running NVIDIA's tools, each under a time limit: nvcc for the resource report and PTX,
nvdisasm or cuobjdump for SASS, c++filt for readable kernel names.

Finding the tools is `toolkit_find`'s job; reading their output, `toolkit_parse`'s.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kplay.kernels.backends.toolkit_find import find_tool, tool_version
from kplay.kernels.backends.toolkit_parse import parse_diagnostics, parse_ptxas, truncate
from kplay.kernels.models import CompileStage, Diagnostic, Resources

KERNEL_FILE = "kernel.cu"
TEXT_LIMIT_BYTES = 200_000
# -keep leaves the PTX beside the cubin: PTX, SASS and ptxas -v from one nvcc call.
NVCC_FLAGS = ("-std=c++17", "-lineinfo", "-cubin", "-Xptxas", "-v", "-keep", "-keep-dir", ".")


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
    """SASS of folder/kernel.cubin. nvdisasm first: it marks each instruction's source line,
    and with -gi the lines of the learner's code that inlined it."""
    for name, args in (("nvdisasm", ["-c", "-gi"]), ("cuobjdump", ["-sass"])):
        tool = find_tool(name, near=nvcc)
        if tool is None:
            continue
        result = run_tool([str(tool), *args, "kernel.cubin"], folder, 60, f"{name}.log")
        if result.returncode == 0 and result.output.strip():
            # Imported here: lineinfo reads this module's names of the learner's file.
            from kplay.kernels.backends.lineinfo import compact_sass_marks

            return _listing(folder / f"{name}.log", folder, "SASS", compact_sass_marks)
    return None


def _listing(
    path: Path, folder: Path, what: str, tidy: Callable[[str], str] | None = None
) -> str | None:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return None
    # Paths of the private work folder mean nothing to a reader, and would spoil the cache.
    text = text.replace(f"{folder}/", "")
    return truncate(tidy(text) if tidy else text, TEXT_LIMIT_BYTES, what)


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
