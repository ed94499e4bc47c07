"""Which line of the learner's source each row of a compiler listing comes from.

Every listing carries the mapping in its own notation: nvdisasm's `//## File "...", line N`
comments (with `-gi`, also the lines that inlined the code), PTX's `.loc` directives,
MLIR's `loc(...)` attributes (Triton's TTIR and TTGIR) and LLVM's `!DILocation` metadata.
Each reader below turns one of them into a `LineMap`: for a row of the listing, the
learner's line it computes (the innermost one in the learner's file) and the learner's
lines that called it there, through inlined functions.

Pure text work, so each notation is testable without a compiler.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from kplay.kernels.backends.pysource import SOURCE_STEM
from kplay.kernels.backends.toolkit_run import KERNEL_FILE
from kplay.kernels.sassfeatures import instructions

FilePredicate = Callable[[str], bool]
_MAX_DEPTH = 32  # inlining deeper than this is a cycle in malformed input


def learner_file(name: str) -> bool:
    """The file the engine writes the learner's source to: kernel.cu, or kplay_src*.py."""
    base = PurePosixPath(name.strip()).name
    return base == KERNEL_FILE or base.startswith(SOURCE_STEM)


@dataclass
class LineMap:
    # Listing row (0-based) -> the learner's line (1-based) the row computes.
    lines: dict[int, int] = field(default_factory=dict)
    # Listing row -> the learner's lines that inlined it, innermost call first.
    via: dict[int, list[int]] = field(default_factory=dict)

    def add(self, row: int, chain: list[tuple[str, int]], mine: FilePredicate) -> None:
        """`chain`: (file, line) from the innermost location out to the kernel."""
        own: list[int] = []
        for name, line in chain:
            if line > 0 and mine(name) and line not in own:
                own.append(line)
        if own:
            self.lines[row] = own[0]
            if len(own) > 1:
                self.via[row] = own[1:]

    def rows_of(self, line: int) -> list[int]:
        return sorted(r for r, n in self.lines.items() if n == line)

    def source_lines(self) -> list[int]:
        return sorted(set(self.lines.values()))


# ---------------------------------------------------------------- SASS (nvdisasm -g / -gi)

_SASS_MARK = re.compile(
    r'^\s*//##\s*File\s+"(?P<file>[^"]*)",\s*line\s+(?P<line>\d+)'
    r'(?:\s+inlined at\s+"(?P<outer_file>[^"]*)",\s*line\s+(?P<outer_line>\d+))?'
)
_SASS_FUNCTION = re.compile(r"^\.text\.[\w$.@]+:\s*$")


def sass_lines(sass: str, mine: FilePredicate = learner_file) -> LineMap:
    """nvdisasm's line comments: a run of them describes the instructions that follow."""
    rows = {i.row for i in instructions(sass)}
    out = LineMap()
    chain: list[tuple[str, int]] = []
    in_marks = False
    for row, text in enumerate(sass.splitlines()):
        if mark := _SASS_MARK.match(text):
            if not in_marks:
                chain = []
            in_marks = True
            chain.append((mark["file"], int(mark["line"])))
            if mark["outer_file"] is not None:
                chain.append((mark["outer_file"], int(mark["outer_line"])))
            continue
        in_marks = False
        if _SASS_FUNCTION.match(text):
            chain = []
        elif row in rows and chain:
            out.add(row, chain, mine)
    return out


def compact_sass_marks(sass: str, mine: FilePredicate = learner_file) -> str:
    """nvdisasm -gi's line comments cut down to the ones that name the learner's file.

    Before every instruction whose location changes, nvdisasm writes the whole inlining
    chain, one comment per level through every header (twenty deep in CUTLASS), which
    makes the listing many times the size of its code. Kept of each run of comments: those
    that name the learner's file (as the file, or where it was inlined); a run naming none
    keeps its first, innermost comment; a run the same as the one kept before is dropped.
    `sass_lines` reads the same lines from either.
    """
    out: list[str] = []
    block: list[str] = []
    last: list[str] | None = None

    def flush() -> None:
        nonlocal last
        if not block:
            return
        kept = [t for t in block if _names_learner(t, mine)] or block[:1]
        if kept != last:
            out.extend(kept)
            last = kept
        block.clear()

    for text in sass.splitlines():
        if _SASS_MARK.match(text):
            block.append(text)
            continue
        flush()
        if _SASS_FUNCTION.match(text):
            last = None
        out.append(text)
    flush()
    return "\n".join(out) + ("\n" if sass.endswith("\n") else "")


def _names_learner(text: str, mine: FilePredicate) -> bool:
    mark = _SASS_MARK.match(text)
    if mark is None:
        return False
    return mine(mark["file"]) or (mark["outer_file"] is not None and mine(mark["outer_file"]))


# ---------------------------------------------------------------- PTX (.loc)

_PTX_FILE = re.compile(r'^\s*\.file\s+(\d+)\s+"([^"]*)"')
_PTX_LOC = re.compile(
    r"^\s*\.loc\s+(\d+)\s+(\d+)\s+(\d+)(?:.*?inlined_at\s+(\d+)\s+(\d+)\s+(\d+))?"
)
_PTX_FUNCTION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(?:entry|func)\b")
_PTX_INSTRUCTION = re.compile(r"^\s+(?:@!?%\w+\s+)?[a-z][\w.:]*(?:\s[^;]*)?;")


def ptx_lines(ptx: str, mine: FilePredicate = learner_file) -> LineMap:
    """PTX's `.loc FILE LINE COL[, ..., inlined_at FILE LINE COL]` before its instructions."""
    lines = ptx.splitlines()
    files = {m[1]: m[2] for text in lines if (m := _PTX_FILE.match(text))}
    # Where each inlined location was itself inlined: the directive names one caller only.
    callers: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    out = LineMap()
    chain: list[tuple[str, int]] = []
    for row, text in enumerate(lines):
        if loc := _PTX_LOC.match(text):
            here = (loc[1], loc[2], loc[3])
            if loc[4] is not None:
                callers[here] = (loc[4], loc[5], loc[6])
            chain = []
            for _ in range(_MAX_DEPTH):
                chain.append((files.get(here[0], ""), int(here[1])))
                if here not in callers:
                    break
                here = callers[here]
        elif _PTX_FUNCTION.match(text):
            chain = []
        elif chain and _PTX_INSTRUCTION.match(text):
            out.add(row, chain, mine)
    return out


# ---------------------------------------------------------------- MLIR (TTIR, TTGIR)

_MLIR_DEF = re.compile(r"^\s*#(loc\d*)\s*=\s*(loc\(.*\))\s*$")
_MLIR_TOKEN = re.compile(r'"(?P<file>[^"]*)":(?P<line>\d+):\d+|#(?P<ref>loc\d*)\b')


def mlir_lines(text: str, mine: FilePredicate = learner_file) -> LineMap:
    """`loc(...)` at the end of each operation, through the `#locN = loc(...)` aliases.

    A `callsite(callee at caller)` names the inlined location first, so the order in
    which file positions appear is innermost first.
    """
    lines = text.splitlines()
    defs = {m[1]: m[2] for t in lines if (m := _MLIR_DEF.match(t))}

    def resolve(expr: str, depth: int = 0) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for tok in _MLIR_TOKEN.finditer(expr):
            if tok["file"] is not None:
                found.append((tok["file"], int(tok["line"])))
            elif depth < _MAX_DEPTH and tok["ref"] in defs:
                found.extend(resolve(defs[tok["ref"]], depth + 1))
        return found

    out = LineMap()
    for row, line in enumerate(lines):
        at = line.rfind(" loc(")
        if at < 0 or _MLIR_DEF.match(line):
            continue
        out.add(row, resolve(line[at:]), mine)
    return out


# ---------------------------------------------------------------- LLVM IR (!dbg)

_LL_META = re.compile(r"^!(\d+)\s*=\s*(?:distinct\s+)?!(\w+)\((.*)\)\s*$")
_LL_DBG = re.compile(r",\s*!dbg\s+!(\d+)\s*$")


def _field(body: str, name: str) -> str | None:
    m = re.search(rf"\b{name}:\s*(!?\d+|\"[^\"]*\")", body)
    return m[1].strip('"') if m else None


def llir_lines(text: str, mine: FilePredicate = learner_file) -> LineMap:
    """`!dbg !N` on each instruction; !N a DILocation, its file found through its scope."""
    lines = text.splitlines()
    meta = {m[1]: (m[2], m[3]) for t in lines if (m := _LL_META.match(t))}

    def file_of(ref: str | None, depth: int = 0) -> str:
        if ref is None or not ref.startswith("!") or depth > _MAX_DEPTH:
            return ""
        kind, body = meta.get(ref[1:], ("", ""))
        if kind == "DIFile":
            return _field(body, "filename") or ""
        return file_of(_field(body, "file") or _field(body, "scope"), depth + 1)

    def chain(number: str) -> list[tuple[str, int]]:
        found: list[tuple[str, int]] = []
        for _ in range(_MAX_DEPTH):
            kind, body = meta.get(number, ("", ""))
            if kind != "DILocation":
                break
            found.append((file_of(_field(body, "scope")), int(_field(body, "line") or 0)))
            outer = _field(body, "inlinedAt")
            if outer is None:
                break
            number = outer.lstrip("!")
        return found

    out = LineMap()
    for row, line in enumerate(lines):
        if not line.startswith("!") and (dbg := _LL_DBG.search(line)):
            out.add(row, chain(dbg[1]), mine)
    return out


READERS: dict[str, Callable[[str, FilePredicate], LineMap]] = {
    "sass": sass_lines,
    "ptx": ptx_lines,
    "ttir": mlir_lines,
    "ttgir": mlir_lines,
    "llir": llir_lines,
}


def line_map(kind: str, text: str, mine: FilePredicate = learner_file) -> LineMap:
    """The map of a listing of `kind` (sass, ptx, ttir, ttgir, llir); empty for others."""
    reader = READERS.get(kind)
    return reader(text, mine) if reader else LineMap()
