"""The Profile button's bar, measured through the real app: submit -> profile shown.

The app runs in process (TestClient) with its real local executor, sandbox as configured
(KPLAY_SANDBOX). A correct kernel is submitted through the JSON API and awaited; then the
page's Profile button is pressed (POST /runs/{id}/profile, as the page's script sends
it) and the profile run's card is polled every 100 ms until it shows the panel. Printed:
the run's own time, submit -> panel for the profile, the profile's kernel, its top
stall reasons and the learner's lines; the card HTML is written to --out.

    python bench/profile_roundtrip.py [--file FILE] [--problem sgemm] [--profiles 2] [--out DIR]

(FILE: the warptiled SGEMM of Part II by default.)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient  # noqa: E402

from kplay.app.main import create_app  # noqa: E402
from kplay.config import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WARPTILE = ROOT / "kernels/problems/sgemm/solutions/correct/gemm_07_warptile.cu"
FINAL = {"done", "wrong", "compile_error", "runtime_error", "timeout", "rejected", "suspicious"}
PAGE = {"HX-Request": "true"}


def wait_final(client: TestClient, run_id: str, limit_s: float) -> dict:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        body = client.get(f"/api/v1/runs/{run_id}").json()
        if body["state"] in FINAL:
            return body
        time.sleep(0.1)
    raise SystemExit(f"run {run_id} not final after {limit_s} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=WARPTILE)
    parser.add_argument("--problem", default="sgemm")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--profiles", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp()))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    db = args.out / "bench.sqlite3"
    settings = Settings(database_url=f"sqlite:///{db}", job_timeout_s=120.0)  # type: ignore[call-arg]
    figures: dict = {"file": str(args.file.relative_to(ROOT)), "profiles": []}
    with TestClient(create_app(settings)) as client:
        source = args.file.read_text()
        started = time.monotonic()
        body = {"problem": args.problem, "backend": args.backend, "source": source}
        run_id = client.post("/api/v1/runs", json=body).json()["id"]
        run = wait_final(client, run_id, 300)
        figures["run_s"] = round(time.monotonic() - started, 2)
        figures["run_state"] = run["state"]
        print(f"run: {run['state']} in {figures['run_s']} s: {run['detail']}")
        for attempt in range(args.profiles):
            started = time.monotonic()
            reply = client.post(f"/runs/{run_id}/profile", headers=PAGE)
            found = re.search(r'data-run-id="([0-9a-f]{32})"', reply.text)
            if reply.status_code != 201 or found is None:
                raise SystemExit(f"profile refused ({reply.status_code}): {reply.text[:500]}")
            profile_id = found.group(1)
            body = wait_final(client, profile_id, 600)
            card = client.get(f"/runs/{profile_id}/card").text
            took = round(time.monotonic() - started, 2)
            shown = "profile-panel" in card
            (args.out / f"profile_card_{attempt}.html").write_text(card)
            prof = (body.get("result") or {}).get("profile") or {}
            row = {
                "submit_to_panel_s": took,
                "state": body["state"],
                "detail": body["detail"],
                "panel_shown": shown,
                "kernel": prof.get("kernel"),
                "profile_seconds": prof.get("seconds"),
                "report_bytes": prof.get("report_bytes"),
                "stalls": [s["reason"] for s in prof.get("stalls", [])[:4]],
                "lines": [
                    (x["line"], x["share_percent"], x["code"]) for x in prof.get("lines", [])[:4]
                ],
                "speed_of_light": prof.get("speed_of_light"),
            }
            figures["profiles"].append(row)
            print(json.dumps(row, indent=1))
        original = client.get(f"/runs/{run_id}/card").text
        (args.out / "run_card_with_profile.html").write_text(original)
    (args.out / "profile_roundtrip.json").write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
