"""Where does the engine's time of a short kernel differ from the kernel's own duration?

    python bench/timing_cupti.py [--cap-s 2]

For the fidelity table's targets (bench/timing_fidelity.py, all but cuBLAS), times each
with the engine's timer (kernels.timing.time_gpu: read-sweep L2 flush, CUDA events around
each launch) while CUPTI's activity API records every kernel's start and end on the GPU,
then prints the engine's median beside the median CUPTI duration of the same launches (the
target's kernel only; the flush kernels are left out). Nsight Compute's
gpu__time_duration is the same GPU-side duration, taken under its own cache control; this
tells the events' share of the gap from the caches' share. A second engine run with CUPTI
off shows what recording itself costs. Needs a CUDA GPU and `cupti-python`.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cap-s", type=float, default=2.0)
    args = parser.parse_args()
    from cupti import cupti

    from bench.timing_fidelity import _targets
    from kplay.kernels import timing

    records: list[tuple[str, int]] = []

    def requested():  # type: ignore[no-untyped-def]
        return 8 * 1024 * 1024, 0

    def completed(activities: list) -> None:  # type: ignore[type-arg]
        for a in activities:
            if a.kind == cupti.ActivityKind.CONCURRENT_KERNEL:
                records.append((str(a.name), int(a.end - a.start)))

    cupti.activity_register_callbacks(requested, completed)
    print(
        "| kernel | engine, CUPTI on (µs) | CUPTI kernel duration (µs) | engine/CUPTI | "
        "launches | engine, CUPTI off (µs) |"
    )
    print("|---|---|---|---|---|---|")
    for name, (fn, regex) in _targets().items():
        if name.startswith("cuBLAS"):
            continue
        records.clear()
        cupti.activity_enable(cupti.ActivityKind.CONCURRENT_KERNEL)
        with_cupti = timing.time_gpu(fn, cap_s=args.cap_s)
        cupti.activity_flush_all(1)
        cupti.activity_disable(cupti.ActivityKind.CONCURRENT_KERNEL)
        pattern = re.compile(regex)
        mine = [ns / 1e3 for kname, ns in records if pattern.search(kname)]
        mine = mine[3:]  # the timer's warm-up launches
        plain = timing.time_gpu(fn, cap_s=args.cap_s)
        kernel = statistics.median(mine) if mine else float("nan")
        print(
            f"| {name} | {with_cupti.median_us:.2f} | {kernel:.2f} | "
            f"{with_cupti.median_us / kernel:.3f} | {len(mine)} | {plain.median_us:.2f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
