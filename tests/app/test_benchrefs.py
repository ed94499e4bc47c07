import json
from pathlib import Path

from kplay.app.benchrefs import MISSING, fill


def test_placeholders_read_recorded_values_and_never_guess(tmp_path: Path) -> None:
    (tmp_path / "ladder.json").write_text(
        json.dumps({"naive": {"gflops": 497.6, "reps": 10, "pct": 84.94, "ratio": 1.234}})
    )
    text = (
        "naive: [[bench:ladder.naive.gflops]] GFLOP/s over [[bench:ladder.naive.reps]] reps, "
        "[[bench:ladder.naive.pct]]% ([[bench:ladder.naive.ratio]]x); "
        "[[bench:ladder.tiled.gflops]] and [[bench:nofile.a.b]]"
    )
    out = fill(text, tmp_path)
    assert out.startswith("naive: 498 GFLOP/s over 10 reps, 84.9% (1.23x); ")
    assert out.count(MISSING) == 2
