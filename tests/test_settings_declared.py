"""Every KPLAY_ variable is a setting declared once in kplay/config.py, read only through it,
and listed in docs/settings.md.

The project's code (app/, kernels/, workers/, kplay/) may *name* a setting's variable (to pass
it to a child, to say in a message that it is missing) but only the config module reads one.
A read is a lookup with a KPLAY_ literal as the key: `os.environ.get("KPLAY_X")`,
`os.getenv(...)`, `env["KPLAY_X"]`, `"KPLAY_X" in env`, `env.pop(...)`, on any mapping, since a
copy of the environment is still the environment. Setting one (`env["KPLAY_X"] = ...`, for a
child) is not a read, but the name must still be a setting.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kplay.config import LAYERS, EngineSettings, WebSettings, WorkerSettings
from kplay.configview import TABLE_BEGIN, TABLE_END, settings_block

ROOT = Path(__file__).resolve().parent.parent
CODE_DIRS = ("app", "kernels", "workers", "kplay")
CONFIG_MODULE = ROOT / "kplay" / "config.py"
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
DEPLOYMENT_FILES = [ROOT / "Dockerfile", ROOT / "docker-compose.yml", ROOT / ".ci" / "run"]
SETTINGS_DOC = ROOT / "docs" / "settings.md"

# Variables of the test suite, not of the project: each is read by the file named here (and
# its neighbours in tests/), may be mentioned in the docs, and never appears in the code.
NOT_SETTINGS = {
    "KPLAY_REQUIRE_SERVICES": "tests/conftest.py",
    "KPLAY_TEST_POSTGRES_URL": "tests/app/conftest.py",
    "KPLAY_BOOK_ARTEFACTS": "tests/app/test_book_pdf.py",
}

NAME = re.compile(r"(?<![A-Za-z0-9_])KPLAY_[A-Z0-9_]*")
LOOKUPS = {"get", "pop", "setdefault", "getenv"}


def code_files() -> list[Path]:
    return sorted(p for d in CODE_DIRS for p in (ROOT / d).rglob("*.py"))


def defined() -> frozenset[str]:
    return WebSettings.env_names()


def _kplay_literal(node: ast.AST | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        if node.value.startswith("KPLAY_"):
            return node.value
    return None


def kplay_reads(source: str) -> list[tuple[int, str]]:
    """(line, name) of every lookup of a KPLAY_ variable by its literal name in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        name = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if called in LOOKUPS:
                name = _kplay_literal(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            name = _kplay_literal(node.slice)
        elif isinstance(node, ast.Compare) and isinstance(node.ops[0], ast.In | ast.NotIn):
            name = _kplay_literal(node.left)
        if name is not None:
            found.append((node.lineno, name))
    return found


def mentions(text: str) -> set[str]:
    return set(NAME.findall(text))


def is_known(name: str) -> bool:
    """A defined setting, or a prefix (KPLAY_, KPLAY_ENGINE_*) that some setting starts with."""
    if name.endswith("_"):
        return any(d.startswith(name) for d in defined())
    return name in defined()


# ---------------------------------------------------------------- the scanner itself


@pytest.mark.parametrize(
    "line",
    [
        'os.environ.get("KPLAY_X")',
        'os.environ.get("KPLAY_X", "1") == "1"',
        'os.getenv("KPLAY_X")',
        'getenv("KPLAY_X")',
        'os.environ["KPLAY_X"]',
        'env["KPLAY_X"]',
        '"KPLAY_X" in os.environ',
        '"KPLAY_X" not in env',
        'env.get("KPLAY_X")',
        'os.environ.pop("KPLAY_X", None)',
        'os.environ.setdefault("KPLAY_X", "1")',
    ],
)
def test_the_scanner_sees_a_read(line: str) -> None:
    assert kplay_reads(f"import os\nx = {line}\n") == [(2, "KPLAY_X")]


@pytest.mark.parametrize(
    "line",
    [
        'env["KPLAY_X"] = "1"',
        'del env["KPLAY_X"]',
        'message = "set KPLAY_X to the Redis URL"',
        'names = ["KPLAY_X", "KPLAY_Y"]',
        'os.environ.get("HOME")',
        "EngineSettings().cache_dir",
        'env[EngineSettings.env_name("cache_dir")]',
    ],
)
def test_the_scanner_lets_the_rest_pass(line: str) -> None:
    assert kplay_reads(f"import os\n{line}\n") == []


def test_mentions_and_prefixes() -> None:
    text = "`KPLAY_CACHE_DIR`, KPLAY_ENGINE_* and KPLAY_<NAME>; not XKPLAY_A"
    assert mentions(text) == {"KPLAY_CACHE_DIR", "KPLAY_ENGINE_", "KPLAY_"}
    assert all(is_known(n) for n in mentions(text))
    assert not is_known("KPLAY_CACHE_FOLDER") and not is_known("KPLAY_NOPE_")


# ---------------------------------------------------------------- the project


def test_only_the_config_module_reads_kplay_variables() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in code_files()
        if path != CONFIG_MODULE
        for line, name in kplay_reads(path.read_text())
    ]
    assert not offenders, "read these through kplay.config instead:\n" + "\n".join(offenders)


def test_every_kplay_name_in_code_and_docs_is_a_setting() -> None:
    unknown = []
    code = code_files()
    for path in [*code, *DOCS, *DEPLOYMENT_FILES]:
        allowed = set() if path in code else set(NOT_SETTINGS)
        for name in sorted(mentions(path.read_text())):
            if not is_known(name) and name not in allowed:
                unknown.append(f"{path.relative_to(ROOT)}: {name}")
    assert not unknown, "not a setting in kplay/config.py:\n" + "\n".join(unknown)


@pytest.mark.parametrize("name", sorted(NOT_SETTINGS))
def test_the_test_suites_own_variables_stay_out_of_the_project(name: str) -> None:
    assert name not in defined()
    reads = {n for _, n in kplay_reads((ROOT / NOT_SETTINGS[name]).read_text())}
    assert name in reads, f"{NOT_SETTINGS[name]} no longer reads {name}; drop it from the list"
    assert name in SETTINGS_DOC.read_text()


def test_the_docs_table_is_the_tree() -> None:
    text = SETTINGS_DOC.read_text()
    start, end = text.find(TABLE_BEGIN), text.find(TABLE_END)
    assert 0 <= start < end, f"{SETTINGS_DOC.name} lost its table markers"
    table = text[start : end + len(TABLE_END)]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("|")]
    rows = {name for cell in first_cells for name in mentions(cell)}
    missing = sorted(defined() - rows)
    assert not missing, f"missing from {SETTINGS_DOC.name}: {missing}"
    assert table == settings_block(), "regenerate the table with `kplay config --markdown`"


def test_each_setting_is_declared_once_with_a_description() -> None:
    seen: dict[str, str] = {}
    for klass in LAYERS:
        own = set(klass.__annotations__) - {"layer"}
        for field in own:
            assert field not in seen, f"{field} declared by {seen.get(field)} and {klass}"
            seen[field] = klass.__name__
        info = klass.model_fields
        for field in own:
            text = info[field].description or ""
            assert text and "\n" not in text, f"{klass.__name__}.{field}: one line, please"
    assert set(seen) == set(WebSettings.model_fields)
    assert set(EngineSettings.model_fields) < set(WorkerSettings.model_fields)
    assert set(WorkerSettings.model_fields) < set(WebSettings.model_fields)


def test_no_other_settings_class_reads_the_environment() -> None:
    from kplay.workers.celery_app import WorkerConfig

    assert WorkerConfig.model_fields.keys() == WorkerSettings.model_fields.keys()
    others = [
        str(p.relative_to(ROOT))
        for p in code_files()
        if p != CONFIG_MODULE and re.search(r"\bBaseSettings\b|\benv_prefix\b", p.read_text())
    ]
    assert not others, f"settings are declared in kplay/config.py only: {others}"
