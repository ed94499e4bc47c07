"""The web playground's two speed bars, measured through the real app.

1. Chapter page server time: many GET requests per chapter through the ASGI app
   (TestClient, in process), server time read from the app's Server-Timing header.
2. A cached numba-cpu run through the local executor: the same correct vector_add
   submitted again and again through the JSON API, submit -> final card data available
   (the run row reaches a final state), polled every 5 ms. The first run warms the worker
   (compile, calibration) and is reported apart.

    python bench/web_bars.py [--page-requests 200] [--runs 30]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fastapi.testclient import TestClient  # noqa: E402

from kplay.app.main import create_app  # noqa: E402
from kplay.config import Settings  # noqa: E402
from kplay.kernels.catalog import get_problem  # noqa: E402

FINAL = {"done", "wrong", "compile_error", "runtime_error", "timeout", "rejected"}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def page_times(client: TestClient, requests: int) -> dict[str, list[float]]:
    index = client.get("/")
    slugs = sorted({part.split('"')[0] for part in index.text.split('href="/book/')[1:]})
    out: dict[str, list[float]] = {}
    for slug in slugs:
        client.get(f"/book/{slug}")  # first render fills the cache
        times = []
        for _ in range(requests):
            response = client.get(f"/book/{slug}")
            assert response.status_code == 200, slug
            times.append(float(response.headers["Server-Timing"].split("dur=")[1]))
        out[slug.rsplit("/", 1)[-1]] = times  # rows are named by chapter slug
    return out


def run_latency(client: TestClient, runs: int) -> tuple[float, list[float]]:
    source = next(
        p.read_text() for b, p in get_problem("vector_add").solutions("correct") if b == "numba-cpu"
    )
    body = {"problem": "vector_add", "backend": "numba-cpu", "source": source}
    times = []
    for _ in range(runs + 1):
        start = time.perf_counter()
        run_id = client.post("/api/v1/runs", json=body).json()["id"]
        while True:
            state = client.get(f"/api/v1/runs/{run_id}").json()["state"]
            if state in FINAL:
                break
            time.sleep(0.005)
        assert state == "done", state
        times.append((time.perf_counter() - start) * 1000.0)
    return times[0], times[1:]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--page-requests", type=int, default=200)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    db = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    # One reader starts every run in a row: lift its rate limit above the run count.
    settings = Settings(
        database_url=f"sqlite:///{db}",
        pool_size=1,
        run_rate_per_reader=f"{args.runs * 4}/minute",
    )
    with TestClient(create_app(settings)) as client:
        pages = page_times(client, args.page_requests)
        first, cached = run_latency(client, args.runs)
    print(f"### Chapter pages: server time over {args.page_requests} requests each (ms)\n")
    print("| chapter | p50 | p95 | max |\n|---|---|---|---|")
    for slug, times in pages.items():
        print(
            f"| {slug} | {statistics.median(times):.2f} | {pct(times, 0.95):.2f} | "
            f"{max(times):.2f} |"
        )
    print("\n### Cached numba-cpu vector_add, full run, submit -> final (ms)\n")
    print(f"first (warms the worker): {first:.0f} ms\n")
    print("| runs | p50 | p95 | max |\n|---|---|---|---|")
    print(
        f"| {len(cached)} | {statistics.median(cached):.0f} | {pct(cached, 0.95):.0f} | "
        f"{max(cached):.0f} |"
    )


if __name__ == "__main__":
    main()
