"""Reading a learner's CUDA C++ source: kernel names, name expressions, parameter lists.

Pure text work, no compiler: the backend uses it to explain a missing kernel and to
check a kernel's signature against the problem before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable


def normalise_arch(value: str) -> str:
    """'90', '9.0', 'sm_90' and 'compute_90a' become 'sm_90' / 'sm_90a'."""
    v = value.strip().lower().removeprefix("sm_").removeprefix("compute_").replace(".", "")
    if not re.fullmatch(r"\d{2,3}[af]?", v):
        raise ValueError(f"not a CUDA architecture: {value!r} (try sm_90)")
    return f"sm_{v}"


def runs_on(wanted: str, device: str) -> bool:
    """Whether code built for `wanted` (sm_90a) runs on a device of arch `device` (sm_90).

    Architecture-specific targets (`a`, `f`) run on their own compute capability only; a
    plain one on any later minor version of its major one.
    """
    w = normalise_arch(wanted).removeprefix("sm_")
    d = normalise_arch(device).removeprefix("sm_").rstrip("af")
    if w[-1] in "af":
        return w[:-1] == d
    return w[:-1] == d[:-1] and int(w) <= int(d)


def kernel_base_name(kernel_name: str) -> str:
    """'ns::sgemm<64, 64>' -> 'sgemm': the identifier the source must define."""
    bare = kernel_name.split("<", 1)[0].strip()
    return bare.rsplit("::", 1)[-1].strip()


def not_found_message(kernel_name: str) -> str:
    base = kernel_base_name(kernel_name)
    return (
        f"kernel '{kernel_name}' not found: this problem launches a __global__ function "
        f"named '{base}' (e.g. extern \"C\" __global__ void {base}(...)); check its spelling"
    )


def kernel_name_problem(kernel_name: str) -> Callable[[str], str]:
    """Words for a compiler error about the kernel's name rather than the learner's code."""

    def describe(message: str) -> str:
        if "undefined" in message or "not found" in message:
            return not_found_message(kernel_name)
        return f"kernel '{kernel_name}': {message}"

    return describe


_COMMENT_OR_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*.*?\*/', re.S)


def _strip_comments(source: str) -> str:
    def blank(m: re.Match[str]) -> str:
        text = m.group(0)
        return text if text.startswith('"') else re.sub(r"[^\n]", " ", text)

    return _COMMENT_OR_STRING.sub(blank, source)


def _split_top_level(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "(<[{":
            depth += 1
        elif ch in ")>]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def kernel_parameters(source: str, kernel_name: str) -> list[str] | None:
    """Parameter names of the __global__ function `kernel_name`, read from the source."""
    code = _strip_comments(source)
    base = re.escape(kernel_base_name(kernel_name))
    for glob in re.finditer(r"\b__global__\b", code):
        found = re.compile(rf"\b{base}\s*\(").search(code, glob.end())
        if found is None or re.search(r"[;{}]", code[glob.end() : found.start()]):
            continue
        depth, end = 0, found.end() - 1
        for end in range(found.end() - 1, len(code)):
            depth += {"(": 1, ")": -1}.get(code[end], 0)
            if depth == 0:
                break
        params = _split_top_level(code[found.end() : end])
        if params == ["void"]:
            return []
        names = []
        for i, param in enumerate(params):
            decl = re.sub(r"\[[^\]]*\]", "", param.split("=", 1)[0]).strip()
            ident = re.search(r"([A-Za-z_]\w*)\s*$", decl)
            typed = ident and len(decl.split()) > 1 or "*" in decl or "&" in decl
            names.append(ident.group(1) if ident and typed else f"arg{i}")
        return names
    return None
