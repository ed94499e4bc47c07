"""Reading what NVIDIA's tools print: compiler diagnostics, `ptxas -v` resource reports, PTX.

Pure text work: the output of nvcc, NVRTC and ptxas in, models out, so every format is
testable without a toolkit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from kplay.kernels.models import Diagnostic, Resources

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
    cut = (
        f"{head}\n// [{what} truncated: showing the first {limit_bytes // 1000} KB "
        f"of {len(data) // 1000} KB]\n"
    )
    if what == "SASS":
        from kplay.kernels.sassfeatures import whole_listing_note  # pure text, no cycle

        cut += whole_listing_note(text)
    return cut
