"""`kplay` from a terminal: bad input gets a clear message and exit code 2, never a traceback."""

from __future__ import annotations

import json
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
    assert "unknown problem 'vector_addd'" in err and "vector_add" in err


def test_backend_cannot_be_inferred(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "kernel.txt"
    src.write_text(GOOD_CPU)
    assert main(["run", str(src), "--problem", "vector_add"]) == 2
    assert "--backend" in capsys.readouterr().err


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
