"""What the box reads from a compiled CuTe DSL module: the launch's parameter structs
(LLVM types in the host code) and the cubin's resources and SASS (cuobjdump, where found).
"""

from __future__ import annotations

import re
import subprocess
import tempfile

from kplay.kernels.backends.toolkit_find import find_tool
from kplay.kernels.backends.toolkit_parse import truncate
from kplay.kernels.backends.toolkit_run import TEXT_LIMIT_BYTES
from kplay.kernels.models import CompileStage, Resources

# Size and alignment of the LLVM leaf types the DSL passes to a kernel.
_LEAF = {"ptr": 8, "i64": 8, "f64": 8, "i32": 4, "f32": 4, "i16": 2, "f16": 2, "bf16": 2,
         "i8": 1, "i1": 1}  # fmt: skip
_TOKEN = re.compile(r"struct<\(|\)>|ptr(?:<\d+>)?|bf16|[if]\d+|,|\s+")


def _parse(tokens: list[str], at: int) -> tuple[list, int]:
    """A struct's fields from tokens[at] (just past `struct<(`), up to its `)>`."""
    fields: list = []
    while tokens[at] != ")>":
        tok = tokens[at]
        if tok == "struct<(":
            inner, at = _parse(tokens, at + 1)
            fields.append(inner)
        elif tok != ",":
            fields.append("ptr" if tok.startswith("ptr") else tok)
        at += 1
    return fields, at


def _layout(node: list | str, offset: int) -> tuple[list[tuple[str, int]], int, int]:
    """(leaves with their offsets, end offset, alignment) of a field laid out at `offset`."""
    if isinstance(node, str):
        size = _LEAF[node]
        start = (offset + size - 1) // size * size
        return [(node, start)], start + size, size
    leaves, align, at = [], 1, offset
    for field in node:
        inner_align = _align(field)
        at = (at + inner_align - 1) // inner_align * inner_align
        got, at, _ = _layout(field, at)
        leaves += got
        align = max(align, inner_align)
    return leaves, (at + align - 1) // align * align, align


def _align(node: list | str) -> int:
    if isinstance(node, str):
        return _LEAF[node]
    return max((_align(f) for f in node), default=1)


def llvm_fields(text: str) -> list[tuple[list[str], int]]:
    """Each top-level field of an `!llvm.struct<(...)>`: its leaf types in order and its size.

    Offsets follow LLVM's natural layout (every type aligned to its size, structs to their
    widest member), which is how NVPTX lays out a by-value struct parameter.
    """
    tokens = [t for t in _TOKEN.findall(text.removeprefix("!llvm.")) if not t.isspace()]
    if not tokens or tokens[0] != "struct<(":
        raise ValueError(f"not an LLVM struct type: {text[:80]}")
    fields, _ = _parse(tokens, 1)
    out = []
    for field in fields:
        leaves, size, _ = _layout(field, 0)
        out.append(([leaf for leaf, _ in leaves], size))
    return out


def _cuobjdump(args: list[str], cubin: bytes) -> str | None:
    tool = find_tool("cuobjdump")
    if tool is None:
        return None
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        try:
            done = subprocess.run([str(tool), *args, f.name], capture_output=True, text=True,
                                  timeout=60)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired):
            return None
    return done.stdout if done.returncode == 0 else None


def cubin_stage(cubin: bytes, entry: str, arch: str, compiler: str, ms: float) -> CompileStage:
    """The build's report: registers, shared, local memory and SASS where cuobjdump runs."""
    usage = _cuobjdump(["-res-usage"], cubin) or ""

    def number(key: str) -> int | None:
        match = re.search(rf"\b{key}:(\d+)", usage)
        return int(match[1]) if match else None

    resources = Resources(
        kernel=entry, registers=number("REG"), shared_bytes=number("SHARED"),
        stack_frame_bytes=number("STACK"), arch=arch,
    )  # fmt: skip
    sass = _cuobjdump(["-sass"], cubin)
    notes = [f"compiled for {arch} in {ms:.0f} ms, a {len(cubin)}-byte cubin"]
    if resources.registers is not None:
        notes.append(f"{resources.registers} registers per thread")
    if sass is None:
        notes.append("no cuobjdump here: no SASS listing or register count")
    return CompileStage(
        ok=True, log="; ".join(notes), resources=[resources], compiler=compiler,
        sass=truncate(sass, TEXT_LIMIT_BYTES, "SASS") if sass else None, duration_ms=ms,
    )  # fmt: skip
