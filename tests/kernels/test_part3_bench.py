"""bench/part3.py: the one call that re-measures Part III keeps each script's table and says
when a script failed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _load():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("part3_bench", ROOT / "bench" / "part3.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_only_the_tables_rows_are_kept() -> None:
    part3 = _load()
    printed = 'copy bandwidth ...\n| row | GB/s |\n|---|---|\n| a | 1 |\n{"meta": 1}\n'
    assert part3.table_lines(printed) == ["| row | GB/s |", "|---|---|", "| a | 1 |"]


def test_a_failing_script_fails_the_call(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    part3 = _load()
    # Both scripts replaced by ones that print a table, one of them then failing.
    good = tmp_path / "good.py"
    good.write_text("import sys\nprint('| x |')\n")
    bad = tmp_path / "bad.py"
    bad.write_text("import sys\nprint('| y |')\nsys.exit(3)\n")
    monkeypatch.setattr(
        part3,
        "SCRIPTS",
        (("Good", [str(good)], "g.json", "--out"), ("Bad", [str(bad)], "b.json", "--out")),
    )
    assert part3.main(["--out", str(tmp_path / "out")]) == 1
    shown = capsys.readouterr().out
    assert "| x |" in shown and "| y |" in shown and "exited 3" in shown
