"""What a host kernel's launch costs when the kernel lives in the learner's box.

    python bench/box_roundtrip.py [--calls 2000] [--n 16777216]

Times, with the evaluator's clock, (a) an empty numba-cpu function called through a box
(one request, one answer: the fixed cost a boxed launch adds to every timed repetition),
(b) the same function called in this process, and (c) a triad on n float32 elements in
shared memory through the box against (d) on private arrays in this process: the
difference there is the box plus what shared memory costs a streaming kernel (no
transparent huge pages for memfd pages on most hosts).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.benchlib import commit  # noqa: E402
from kplay.kernels.backends.base import LaunchSpec, get_backend  # noqa: E402
from kplay.kernels.remote import spawn_plain_box  # noqa: E402
from kplay.kernels.shm import SharedArena  # noqa: E402

EMPTY = "import numba\n\n@numba.njit\ndef k(a, n):\n    pass\n"
TRIAD = (
    "import numba\n\n@numba.njit(parallel=True)\ndef k(a, b, c, n):\n"
    "    for i in numba.prange(n):\n        a[i] = b[i] + 2.0 * c[i]\n"
)


def _times(call, args, reps: int) -> list[float]:  # type: ignore[no-untyped-def]
    call(args)
    out = []
    for _ in range(reps):
        t = time.perf_counter_ns()
        call(args)
        out.append((time.perf_counter_ns() - t) / 1000)
    return out


def _row(name: str, us: list[float]) -> None:
    us = sorted(us)
    print(f"| {name} | {statistics.median(us):.1f} | {us[int(0.9 * (len(us) - 1))]:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--n", type=int, default=1 << 24)
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    backend = get_backend("numba-cpu")
    spec = LaunchSpec(kernel="k")
    print(f"commit {commit()}; numba-cpu; {args.calls} empty calls, triad on {args.n} float32")
    print("| measure | median µs | p90 µs |\n|---|---|---|")
    client, proc = spawn_plain_box()
    try:
        with_arena = SharedArena()
        client.arena = with_arena
        stage, boxed = client.compile(backend, EMPTY, "k", export=False)
        assert stage.ok and boxed is not None, stage.log
        one = with_arena.alloc_copy(np.zeros(1, np.float32))
        _row(
            "empty call through the box",
            _times(lambda a: boxed.launch(a, spec), [one, np.int64(1)], args.calls),
        )
        with __import__("tempfile").TemporaryDirectory() as tmp:
            _, local = backend.compile(EMPTY, "k", Path(tmp))
            assert local is not None
            _row(
                "empty call in this process",
                _times(
                    lambda a: local.launch(a, spec),
                    [np.zeros(1, np.float32), np.int64(1)],
                    args.calls,
                ),
            )
    finally:
        client.close()
        proc.wait(timeout=30)
    client, proc = spawn_plain_box()
    try:
        arena = SharedArena()
        client.arena = arena
        stage, boxed = client.compile(backend, TRIAD, "k", export=False)
        assert stage.ok and boxed is not None, stage.log
        rng = np.random.default_rng(0)
        host = [rng.random(args.n, dtype=np.float32) for _ in range(3)]
        shared = [arena.alloc_copy(h) for h in host] + [np.int64(args.n)]
        _row(
            f"triad n={args.n} through the box (shared memory)",
            _times(lambda a: boxed.launch(a, spec), shared, args.reps),
        )
        with __import__("tempfile").TemporaryDirectory() as tmp:
            _, local = backend.compile(TRIAD, "k", Path(tmp))
            assert local is not None
            private = [h.copy() for h in host] + [np.int64(args.n)]
            _row(
                f"triad n={args.n} in this process (private memory)",
                _times(lambda a: local.launch(a, spec), private, args.reps),
            )
            _row(
                f"triad n={args.n} in this process (shared memory)",
                _times(lambda a: local.launch(a, spec), shared, args.reps),
            )
    finally:
        client.close()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
