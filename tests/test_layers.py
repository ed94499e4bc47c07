"""The house rules that keep the package readable: imports run one way, modules stay small.

Layers, lowest first: `kplay.config` (with `kplay.configdefaults`) and `kplay.resources`
(leaves), `kplay.kernels` (the engine), `kplay.workers` (processes and queues), `kplay.app`
(the web), `kplay.cli` (the terminal front door over all of them). A module may import its
own layer and those below.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# Folder -> import name, as pyproject.toml maps them.
FOLDERS = {"kernels": "kplay.kernels", "workers": "kplay.workers", "app": "kplay.app"}
RANK = {
    "kplay": 0,
    "kplay.config": 0,
    "kplay.configdefaults": 0,
    "kplay.resources": 0,
    "kplay.kernels": 1,
    "kplay.workers": 2,
    "kplay.app": 3,
    "kplay.cli": 4,
}
MAX_LINES = 400


def _layer(module: str) -> str | None:
    """The layer of a module; any other module of `kplay/` sits with the CLI, at the top."""
    if module == "kplay":
        return "kplay"
    for name in sorted(RANK, key=len, reverse=True):
        if name != "kplay" and (module == name or module.startswith(name + ".")):
            return name
    return "kplay.cli" if module.startswith("kplay.") else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT)
    top = rel.parts[0]
    parts = [FOLDERS.get(top, top), *rel.parts[1:]]
    parts[-1] = parts[-1].removesuffix(".py")
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_sources() -> list[Path]:
    files = [
        p for top in ("kernels", "workers", "app", "kplay") for p in (ROOT / top).rglob("*.py")
    ]
    return sorted(p for p in files if "problems" not in p.relative_to(ROOT).parts)


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out += [(node.lineno, node.module)]
            out += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return out


def test_the_sources_are_found() -> None:
    names = {_module_name(p) for p in _package_sources()}
    assert {"kplay.kernels.evaluate", "kplay.workers.child", "kplay.app.main"} <= names
    assert "kplay.cli" in names and "kplay.config" in names or "kplay.config.__init__" in names


@pytest.mark.parametrize("path", _package_sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_reaches_a_higher_layer(path: Path) -> None:
    own = _layer(_module_name(path))
    assert own is not None, f"{path} belongs to no layer"
    upward = []
    for line, target in _imports(path):
        if target.split(".")[0] in ("app", "kernels", "workers"):
            upward.append(f"line {line}: {target} (a top-level name; use kplay.*)")
            continue
        layer = _layer(target)
        if layer is not None and RANK[layer] > RANK[own]:
            upward.append(f"line {line}: {target}")
    assert not upward, f"{own} imports a higher layer: " + "; ".join(upward)


def test_no_module_outside_the_problem_catalog_is_over_400_lines() -> None:
    tops = ("kernels", "workers", "app", "kplay", "tests", "bench", "deploy")
    long = []
    for top in tops:
        for path in (ROOT / top).rglob("*.py"):
            rel = path.relative_to(ROOT)
            if rel.parts[:2] == ("kernels", "problems"):
                continue
            lines = len(path.read_text().splitlines())
            if lines > MAX_LINES:
                long.append(f"{rel} ({lines})")
    assert not long, "over 400 lines: " + ", ".join(sorted(long))
