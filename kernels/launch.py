"""Resolving a launch: problem default <- source `kplay:` directive <- job override.

A learner sets the launch in the source with one comment line, e.g.
    // kplay: grid=(ceil_div(N,32),ceil_div(M,32)) block=(32,8) smem=0
    # kplay: grid=ceil_div(n,BLOCK) BLOCK=2048 num_warps=8

A CUDA C++ cell may also ask for an architecture-specific target (`arch=sm_90a`, which
`wgmma` and `setmaxnreg` need), a thread-block cluster (`cluster=(2,1)`) and TMA
descriptors for named arrays (`tma.A=(64,64) tma.A.swizzle=128B`; see kernels.tma).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kplay.kernels import formula, tma
from kplay.kernels.backends.base import LaunchSpec
from kplay.kernels.models import LaunchOverride
from kplay.kernels.problem import LaunchDefault

_DIRECTIVE = re.compile(r"^\s*(?://|#)\s*kplay:\s*(?P<body>.*)$", re.MULTILINE)
_STRUCTURAL = {
    "kernel", "grid", "block", "smem", "shared_mem_bytes", "num_warps", "num_stages", "arch",
    "cluster",
}  # fmt: skip


class LaunchError(ValueError):
    """A launch the learner wrote cannot be used; the message says why."""


@dataclass
class LaunchPlan:
    """Formulas still unevaluated: one plan serves every case of a run."""

    kernel: str
    grid: list[str]
    block: list[str]
    shared_mem_bytes: str = "0"
    num_warps: int | None = None
    num_stages: int | None = None
    constants: dict[str, str] = field(default_factory=dict)
    directive_line: int | None = None
    arch: str | None = None  # e.g. sm_90a: built for that target, run only where it runs
    cluster: list[str] = field(default_factory=list)
    # Array name -> {"box": [formulas], "swizzle": ..., "l2": ..., "interleave": ...}
    tensor_maps: dict[str, dict[str, Any]] = field(default_factory=dict)


def _split_tuple(value: str) -> list[str]:
    value = value.strip()
    if value.startswith("(") and value.endswith(")"):
        inner, depth, parts, cur = value[1:-1], 0, [], ""
        for ch in inner:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "("
            depth -= ch == ")"
            cur += ch
        if cur.strip():
            parts.append(cur)
        return [p.strip() for p in parts]
    return [value]


def parse_directive(source: str) -> tuple[dict[str, str], int | None]:
    """Key/values of the first `kplay:` comment line and its 1-based line number."""
    match = _DIRECTIVE.search(source)
    if not match:
        return {}, None
    line = source.count("\n", 0, match.start()) + 1
    out: dict[str, str] = {}
    for token in match.group("body").split():
        if "=" not in token:
            raise LaunchError(f"line {line}: kplay directive item {token!r} is not key=value")
        key, value = token.split("=", 1)
        out[key.strip()] = value.strip()
    return out, line


def plan(default: LaunchDefault, source: str, override: LaunchOverride | None) -> LaunchPlan:
    result = LaunchPlan(
        kernel=default.kernel,
        grid=list(default.grid),
        block=list(default.block),
        shared_mem_bytes=default.shared_mem_bytes,
        num_warps=default.num_warps,
        num_stages=default.num_stages,
        constants=dict(default.constants),
    )
    items, line = parse_directive(source)
    result.directive_line = line
    try:
        for key, value in items.items():
            if key == "kernel":
                result.kernel = value
            elif key == "grid":
                result.grid = _split_tuple(value)
            elif key == "block":
                result.block = _split_tuple(value)
            elif key in ("smem", "shared_mem_bytes"):
                result.shared_mem_bytes = value
            elif key == "num_warps":
                result.num_warps = int(value)
            elif key == "num_stages":
                result.num_stages = int(value)
            elif key == "arch":
                result.arch = _arch(value)
            elif key == "cluster":
                result.cluster = _split_tuple(value)
            elif key.startswith("tma."):
                _tensor_map(result.tensor_maps, key, value)
            else:
                result.constants[key] = value
    except tma.TmaError as exc:
        raise LaunchError(f"line {line}: kplay directive: {exc}") from None
    except ValueError as exc:
        raise LaunchError(f"line {line}: kplay directive: {exc}") from None
    if override is not None:
        result.grid = override.grid or result.grid
        result.block = override.block or result.block
        result.shared_mem_bytes = override.shared_mem_bytes or result.shared_mem_bytes
        result.num_warps = override.num_warps or result.num_warps
        result.num_stages = override.num_stages or result.num_stages
        result.constants.update(override.constants)
    return result


def _arch(value: str) -> str:
    from kplay.kernels.backends.cuda_source import normalise_arch

    return normalise_arch(value)


def _tensor_map(maps: dict[str, dict[str, Any]], key: str, value: str) -> None:
    """`tma.A=(64,64)` (the box) or `tma.A.swizzle=128B` (an option) into `maps`."""
    parts = key.split(".")
    if len(parts) not in (2, 3) or not parts[1].isidentifier():
        raise tma.TmaError(f"{key}: write tma.<array>=(box) or tma.<array>.<option>=<value>")
    entry = maps.setdefault(parts[1], {})
    if len(parts) == 2:
        entry["box"] = _split_tuple(value)
    else:
        entry[parts[2]] = tma.check_option(parts[1], parts[2], value)


def requested_arch(source: str) -> str | None:
    """The `arch=` a source's launch line asks for (None when it names none or is unreadable)."""
    try:
        items, _ = parse_directive(source)
        return _arch(items["arch"]) if "arch" in items else None
    except (LaunchError, ValueError):
        return None


def _bind_maps(
    launch: LaunchPlan, env: dict[str, int | float], args: list[tuple[str, str]] | None
) -> tuple[tma.TensorMapSpec, ...]:
    if not launch.tensor_maps:
        return ()
    names = [name for name, _ in args or []]
    out = []
    for name, entry in launch.tensor_maps.items():
        if name not in names:
            known = ", ".join(names) or "none"
            raise LaunchError(f"launch: tma.{name}: no argument named {name} (arguments: {known})")
        if "box" not in entry:
            raise LaunchError(f"launch: tma.{name}: give the box, e.g. tma.{name}=(64,64)")
        box = tuple(formula.evaluate_int(b, env) for b in entry["box"])
        index = names.index(name)
        out.append(
            tma.TensorMapSpec(
                name=name,
                box=box,
                swizzle=entry.get("swizzle", "none"),
                l2=entry.get("l2", "none"),
                interleave=entry.get("interleave", "none"),
                index=index,
                dtype=(args or [])[index][1],
            )
        )
    return tuple(out)


def resolve(
    launch: LaunchPlan,
    params: dict[str, int | float],
    args: list[tuple[str, str]] | None = None,
) -> LaunchSpec:
    """Evaluate the plan's formulas for one case; `args`: the kernel's (name, dtype) in
    order, which tensor maps are bound to."""
    env: dict[str, int | float] = dict(params)
    try:
        constants: dict[str, int] = {}
        for name, text in launch.constants.items():
            constants[name] = formula.evaluate_int(text, env)
            env[name] = constants[name]
        grid = tuple(max(1, formula.evaluate_int(g, env)) for g in launch.grid)
        block = tuple(formula.evaluate_int(b, env) for b in launch.block)
        smem = formula.evaluate_int(launch.shared_mem_bytes, env)
        cluster = tuple(formula.evaluate_int(c, env) for c in launch.cluster)
        maps = _bind_maps(launch, env, args)
    except formula.FormulaError as exc:
        raise LaunchError(f"launch: {exc}") from None
    if any(b <= 0 for b in block):
        raise LaunchError(f"launch: block {block} must be positive in every dimension")
    if smem < 0:
        raise LaunchError(f"launch: shared memory {smem} bytes is negative")
    return LaunchSpec(
        kernel=launch.kernel,
        grid=grid,
        block=block,
        shared_mem_bytes=smem,
        num_warps=launch.num_warps,
        num_stages=launch.num_stages,
        constants=constants,
        cluster=cluster,
        tensor_maps=maps,
    )
