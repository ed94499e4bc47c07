"""Launch overrides typed by a reader (form fields) or sent to the API, checked before storing.

A bad override is a request error (4xx), unlike a bad `kplay:` line in the source, which is
part of the learner's program and gets its verdict from the engine.
"""

from __future__ import annotations

from kplay.kernels import launch as launch_mod
from kplay.kernels.models import LaunchOverride
from kplay.kernels.problem import ProblemSpec


class LaunchInputError(ValueError):
    pass


def split_top_level(text: str) -> list[str]:
    """'(ceil_div(N, 32), M)' -> ['ceil_div(N, 32)', 'M']: commas inside calls stay."""
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    parts, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            parts.append(current.strip())
            current = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            raise LaunchInputError(f"unbalanced parentheses in {text!r}")
        current += ch
    if depth:
        raise LaunchInputError(f"unbalanced parentheses in {text!r}")
    parts.append(current.strip())
    if any(not p for p in parts):
        raise LaunchInputError(f"empty item in {text!r}")
    return parts


def _int_field(name: str, text: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise LaunchInputError(f"{name} must be a whole number, got {text!r}") from None


def override_from_form(
    grid: str = "",
    block: str = "",
    shared_mem_bytes: str = "",
    num_warps: str = "",
    num_stages: str = "",
    constants: str = "",
) -> LaunchOverride | None:
    """The optional "Launch" fields of a cell; None when all are empty."""
    consts: dict[str, str] = {}
    if constants.strip():
        for item in split_top_level(constants.replace("\n", ",")):
            name, sep, value = item.partition("=")
            if not sep or not name.strip().isidentifier() or not value.strip():
                raise LaunchInputError(f"constants: expected NAME=value, got {item!r}")
            consts[name.strip()] = value.strip()
    override = LaunchOverride(
        grid=split_top_level(grid) if grid.strip() else None,
        block=split_top_level(block) if block.strip() else None,
        shared_mem_bytes=shared_mem_bytes.strip() or None,
        num_warps=_int_field("num_warps", num_warps),
        num_stages=_int_field("num_stages", num_stages),
        constants=consts,
    )
    return None if override == LaunchOverride() else override


def check_override(
    problem: ProblemSpec, backend: str, source: str, override: LaunchOverride | None
) -> None:
    """Evaluate the launch the override gives for every test case; raise with the reason."""
    if override is None:
        return
    for name, dims in (("grid", override.grid), ("block", override.block)):
        if dims is not None and not 1 <= len(dims) <= 3:
            raise LaunchInputError(f"launch.{name} needs 1 to 3 dimensions, got {len(dims)}")
    for name, value, top in (
        ("num_warps", override.num_warps, 32),
        ("num_stages", override.num_stages, 8),
    ):
        if value is not None and not 1 <= value <= top:
            raise LaunchInputError(f"launch.{name} must be between 1 and {top}, got {value}")
    if override.num_warps is not None and override.num_warps & (override.num_warps - 1):
        raise LaunchInputError(f"launch.num_warps must be a power of two, got {override.num_warps}")
    default = problem.launch[backend]
    try:
        plan = launch_mod.plan(default, source, override)
    except launch_mod.LaunchError:
        # The source's own directive is broken: that is the program's fault and the engine
        # reports it; judge the override against the problem's defaults alone.
        plan = launch_mod.plan(default, "", override)
    for case in problem.tests:
        try:
            launch_mod.resolve(plan, dict(case.params))
        except launch_mod.LaunchError as exc:
            raise LaunchInputError(f"{exc} (test case {case.name!r})") from None
