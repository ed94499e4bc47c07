"""`kplay` from a terminal: bad input gets a clear message and exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kplay.cli import main

GOOD_CPU = """import numba

@numba.njit
def vector_add(a, b, out, n):
    for i in range(n):
        out[i] = a[i] + b[i]
"""


def _kplay(*args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kplay.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "/nonexistent/k.cu", "--problem", "vector_add"]) == 2
    assert "no such file" in capsys.readouterr().err


def test_unknown_problem_lists_known(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "k.numba_cpu.py"
    src.write_text(GOOD_CPU)
    assert main(["run", str(src), "--problem", "vector_addd"]) == 2
    err = capsys.readouterr().err
    assert "unknown problem 'vector_addd'; did you mean 'vector_add'?" in err
    assert "Known problems: " in err and "sgemm" in err


def test_backend_cannot_be_inferred(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "kernel.txt"
    src.write_text(GOOD_CPU)
    assert main(["run", str(src), "--problem", "vector_add"]) == 2
    assert "--backend" in capsys.readouterr().err


def test_problems_are_listed_in_aligned_columns(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["problem", "backends", "title"]
    # Every row's backends and title start in the header's columns.
    backends_at, title_at = lines[0].index("backends"), lines[0].index("title")
    for line in lines[1:]:
        assert line[backends_at - 2 : backends_at] == "  " and line[backends_at] != " ", line
        assert line[title_at - 2 : title_at] == "  " and line[title_at] != " ", line


def test_problems_lists_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["problems"]) == 0
    assert "sgemm" in capsys.readouterr().out


def test_good_kernel_runs_and_reports_json(tmp_path: Path) -> None:
    src = tmp_path / "add.numba_cpu.py"
    src.write_text(GOOD_CPU)
    proc = _kplay("run", str(src), "--problem", "vector_add", "--mode", "check", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["state"] == "done" and result["check"]["ok"]
    assert "Traceback" not in proc.stderr


def test_a_kernel_only_compiled_exits_apart_from_correct_and_wrong(tmp_path: Path) -> None:
    """`--mode compile` (as CUDA C++ without a GPU): 3, never the 0 of a correct kernel."""
    src = tmp_path / "add.numba_cpu.py"
    src.write_text(GOOD_CPU)
    proc = _kplay("run", str(src), "--problem", "vector_add", "--mode", "compile")
    assert proc.returncode == 3, (proc.stdout, proc.stderr)
    assert proc.stdout.startswith("COMPILED") and "not checked" in proc.stdout
    wrong = tmp_path / "wrong.numba_cpu.py"
    wrong.write_text(GOOD_CPU.replace("a[i] + b[i]", "a[i] - b[i]"))
    assert "a[i] - b[i]" in wrong.read_text()
    proc = _kplay("run", str(wrong), "--problem", "vector_add", "--mode", "check")
    assert proc.returncode == 1 and proc.stdout.startswith("WRONG")


def test_what_the_kernel_printed_is_shown_without_json(tmp_path: Path) -> None:
    src = tmp_path / "loud.numba_cpu.py"
    src.write_text(
        GOOD_CPU.replace("import numba\n", "import numba\nprint('hello from the module')\n")
    )
    proc = _kplay("run", str(src), "--problem", "vector_add", "--mode", "check")
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert "  printed:\n    hello from the module" in proc.stdout


def test_syntax_error_names_the_line(tmp_path: Path) -> None:
    src = tmp_path / "bad.numba_cpu.py"
    src.write_text("import numba\n\n@numba.njit\ndef vector_add(a, b, out, n)\n    pass\n")
    proc = _kplay("run", str(src), "--problem", "vector_add", "--mode", "check")
    assert proc.returncode == 1
    assert "COMPILE_ERROR" in proc.stdout and "line 4" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_wrong_signature_is_explained(tmp_path: Path) -> None:
    src = tmp_path / "sig.numba_cpu.py"
    src.write_text("import numba\n\n@numba.njit\ndef vector_add(a, out, n):\n    out[0] = a[0]\n")
    proc = _kplay("run", str(src), "--problem", "vector_add", "--mode", "check")
    assert proc.returncode == 1
    assert "takes 3 parameter(s)" in proc.stdout and "a, b, out, n" in proc.stdout


def _kplay_with(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`kplay` in a fresh process whose only KPLAY_ variables are those in `env`."""
    base = {k: v for k, v in os.environ.items() if not k.upper().startswith("KPLAY_")}
    return subprocess.run(
        [sys.executable, "-m", "kplay.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, **env},
    )


def _config_line(out: str, name: str) -> list[str]:
    lines = [line.split() for line in out.splitlines() if line.split()[:1] == [name]]
    assert len(lines) == 1, f"{name} is listed {len(lines)} times in:\n{out}"
    return lines[0]


def test_config_says_where_each_value_came_from() -> None:
    env = {"KPLAY_PORT": "9123", "KPLAY_BROKER_URL": "redis://:hunter2@broker:6379/0"}
    proc = _kplay_with(env, "config")
    assert proc.returncode == 0, proc.stderr
    assert _config_line(proc.stdout, "KPLAY_PORT") == ["KPLAY_PORT", "9123", "environment"]
    assert _config_line(proc.stdout, "KPLAY_HOST") == ["KPLAY_HOST", "127.0.0.1", "default"]
    broker = _config_line(proc.stdout, "KPLAY_BROKER_URL")
    assert broker == ["KPLAY_BROKER_URL", "redis://:***@broker:6379/0", "environment"]
    assert "hunter2" not in proc.stdout
    # Every setting is listed, engine's first.
    from kplay.config import WebSettings

    for name in WebSettings.env_names():
        _config_line(proc.stdout, name)
    assert proc.stdout.index("KPLAY_CACHE_DIR") < proc.stdout.index("KPLAY_PORT")


def test_config_as_json_masks_database_passwords() -> None:
    env = {"KPLAY_DATABASE_URL": "postgresql+psycopg://kplay:pw123@db:5432/kplay"}
    proc = _kplay_with(env, "config", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["variable"]: row for row in json.loads(proc.stdout)}
    database = rows["KPLAY_DATABASE_URL"]
    assert database["value"] == "postgresql+psycopg://kplay:***@db:5432/kplay"
    assert database["source"] == "environment" and database["layer"] == "web"
    assert rows["KPLAY_JOBS_PER_CHILD"] == {
        **rows["KPLAY_JOBS_PER_CHILD"],
        "value": "500",
        "source": "default",
        "layer": "worker",
    }
    assert "pw123" not in proc.stdout


def test_config_names_a_bad_variable() -> None:
    proc = _kplay_with(
        {"KPLAY_PORT": "eighty", "KPLAY_BROKER_URL": "redis://:s3cret@h/0"}, "config"
    )
    assert proc.returncode == 2
    assert "KPLAY_PORT='eighty'" in proc.stderr and "integer" in proc.stderr
    assert "Traceback" not in proc.stderr and "s3cret" not in proc.stderr


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:secret@broker:6379/0", "redis://:***@broker:6379/0"),
        (
            "postgresql+psycopg://u:p%40ss@db/k?sslmode=require",
            "postgresql+psycopg://u:***@db/k?sslmode=require",
        ),
        ("postgresql+psycopg://u@db/k", "postgresql+psycopg://u@db/k"),
        ("sqlite:////home/u/kplay.sqlite3", "sqlite:////home/u/kplay.sqlite3"),
        ("not a url", "not a url"),
    ],
)
def test_secrets_are_masked(url: str, shown: str) -> None:
    from kplay.configview import mask_secrets

    assert mask_secrets(url) == shown


def test_a_wrong_2d_output_prints_its_map() -> None:
    from kplay.kernels.catalog import PROBLEMS_DIR

    src = Path(PROBLEMS_DIR) / "transpose/solutions/wrong/transpose_copies_row_major.numba_cpu.py"
    proc = _kplay("run", str(src), "--problem", "transpose", "--mode", "check")
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    lines = proc.stdout.splitlines()
    first = next(i for i, line in enumerate(lines) if "out rows 0-7, columns 0-7" in line)
    assert lines[first + 2].strip() == "0 . x x x x x x x"
