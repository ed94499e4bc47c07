"""Every gold tier is reachable: no gold threshold sits above what the best shipped solution
of its problem recorded on a real device.

The figures are not written here: they are read from the raw files of `bench/problem_runs.py`
named in `data/gold_tiers/recorded_runs.toml`, each reported in a section of bench/RESULTS.md.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from kplay.kernels.catalog import PROBLEMS_DIR, load_problem

ROOT = Path(__file__).resolve().parents[2]
SOURCES = Path(__file__).parent / "data" / "gold_tiers" / "recorded_runs.toml"
RESULTS_MD = ROOT / "bench" / "RESULTS.md"


def _sources() -> dict:
    return tomllib.loads(SOURCES.read_text())


def _best_recorded() -> dict[str, dict[str, float]]:
    """Per problem: the best share of the baseline's speed and of the roofline, in percent,
    over the correct, timed rows of every recorded run."""
    best: dict[str, dict[str, float]] = {}
    for run in _sources()["runs"]:
        for row in json.loads((ROOT / run["file"]).read_text()):
            roof = row.get("roofline") or {}
            check = row.get("check") or {}
            if row.get("state") != "done" or not check.get("ok") or not roof:
                continue
            mine = best.setdefault(row["problem"], {})
            speedup = roof.get("speedup_over_baseline")
            if speedup is not None:
                share = 100.0 * speedup
                mine["baseline"] = max(mine.get("baseline", 0.0), share)
            if roof.get("percent_of_roofline") is not None:
                share = roof["percent_of_roofline"]
                mine["roofline"] = max(mine.get("roofline", 0.0), share)
    return best


def test_every_recorded_run_is_reported_in_results_md() -> None:
    results = RESULTS_MD.read_text()
    for run in _sources()["runs"]:
        path = ROOT / run["file"]
        assert path.is_file(), f"{run['file']}: the recorded run is missing"
        assert run["results_section"] in results, f"{run['file']}: section not in RESULTS.md"
        assert run["file"].removeprefix("bench/") in results or run["file"] in results, (
            f"{run['file']}: RESULTS.md does not name this raw file"
        )
        rows = json.loads(path.read_text())
        devices = {(r.get("roofline") or {}).get("device") for r in rows} - {None}
        assert devices == {run["device"]}, f"{run['file']}: measured on {devices}"


def test_the_covered_problems_have_recorded_rows_and_a_gold_tier() -> None:
    best = _best_recorded()
    for slug in _sources()["covers"]:
        assert slug in best, f"{slug}: no correct, timed row in the recorded runs"
        spec = load_problem(PROBLEMS_DIR / slug)
        assert any(t.name == "gold" for t in spec.tiers), f"{slug}: no gold tier"


# Every problem with a recorded run of its shipped solutions (a problem removed from the
# tree since is skipped; one without a gold tier has nothing to check).
@pytest.mark.parametrize("slug", sorted(_best_recorded()))
def test_gold_tier_is_reached_by_a_shipped_solution(slug: str) -> None:
    if not (PROBLEMS_DIR / slug / "problem.toml").is_file():
        pytest.skip(f"{slug}: no longer in the tree")
    gold = [t for t in load_problem(PROBLEMS_DIR / slug).tiers if t.name == "gold"]
    if not gold:
        pytest.skip(f"{slug}: no gold tier")
    best, tier = _best_recorded()[slug], gold[0]
    if tier.percent_of_baseline is not None:
        reached = best.get("baseline", 0.0)
        assert tier.percent_of_baseline <= reached, (
            f"{slug}: gold asks {tier.percent_of_baseline}% of the baseline's speed; "
            f"the best shipped solution recorded {reached:.1f}%"
        )
    if tier.percent_of_roofline is not None:
        reached = best.get("roofline", 0.0)
        assert tier.percent_of_roofline <= reached, (
            f"{slug}: gold asks {tier.percent_of_roofline}% of the roofline; "
            f"the best shipped solution recorded {reached:.1f}%"
        )
