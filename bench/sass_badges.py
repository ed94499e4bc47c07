"""The Hopper-feature badges against the SASS itself, on a GPU host.

Each kernel below is run through the engine in full mode (so Triton kernels are compiled
for the device and their IR listings are built too); the script writes each SASS listing
to --out, prints the badges `kernels.sassfeatures` derives from it, and beside them an
independent count of the opcodes each badge stands for, taken with a plain regular
expression over the listing, so that a reader can check one against the other and open
the listing to look. For Triton kernels it also says which IR views the result carries.

    python bench/sass_badges.py [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kplay.kernels.evaluate import evaluate  # noqa: E402
from kplay.kernels.models import RunJob  # noqa: E402
from kplay.kernels.problem import backend_for_path  # noqa: E402
from kplay.kernels.sassfeatures import noted_features, sass_features  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
P = ROOT / "kernels" / "problems"
KERNELS = (
    (P / "hgemm_wmma/solutions/correct/hgemm_wgmma_sm90a.cu", "hgemm_wmma"),
    (P / "vector_add/solutions/correct/vector_add_tma.cu", "vector_add"),
    (P / "sum/solutions/correct/reduce_sum_cluster_dsmem.cu", "sum"),
    (P / "gemm_bf16/solutions/correct/gemm_bf16_collective.cutlass.cu", "gemm_bf16"),
    (P / "hgemm_wmma/solutions/correct/hgemm_wmma_pipelined.cu", "hgemm_wmma"),
    (P / "sgemm/solutions/correct/sgemm_blocked.triton.py", "sgemm"),
    (P / "gemm_bf16/solutions/correct/gemm_bf16_tma_ws.cutlass.cu", "gemm_bf16"),
)
# What each badge stands for, as plain opcode prefixes at the start of an instruction.
RAW = {
    "wgmma": r"[IQBH]GMMA",
    "tma_load": r"UTMALDG",
    "tma_store": r"UTMA(?:STG|REDG)",
    "bulk_copy": r"UBLK(?:CP|RED|PF)",
    "mbarrier": r"SYNCS",
    "cluster_barrier": r"U?CGABAR\w*",
    "setmaxnreg": r"USETMAXREG",
    "mma_sync": r"[HIDB]MMA",
    "cp_async": r"LDGSTS",
    "local_memory": r"(?:LDL|STL)",
}


def raw_count(sass: str, pattern: str) -> int:
    insn = re.compile(
        r"(?:/\*[0-9a-f]{4,}\*/|[-\d]{2}:[-\d]:[-\d]:[-Y]:\d+)\s+\{?\s*(?:@!?U?P\w\s+)?("
        + pattern
        + r")\b"
    )
    return len(insn.findall(sass))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp()))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for path, problem in KERNELS:
        if not path.is_file():
            print(f"## {path.name}: not in this tree")
            continue
        backend = backend_for_path(path) or "cuda"
        job = RunJob(problem=problem, backend=backend, source=path.read_text(), mode="full")
        result = evaluate(job)
        stage = result.compile
        sass = (stage.sass if stage else None) or ""
        print(f"## {path.name} ({backend}, {problem}): {result.state.value}: {result.message}")
        if result.timing and result.timing.median_us and result.roofline:
            roof = result.roofline
            print(
                f"   median {result.timing.median_us:.1f} us, "
                f"{roof.achieved_flops_per_s / 1e12:.1f} TFLOP/s, "
                f"{roof.percent_of_roofline:.1f}% of the roofline"
            )
        if stage and not stage.ok:
            print("   " + stage.log[-1500:].replace("\n", "\n   "))
        (args.out / f"{path.name}.sass").write_text(sass)
        if stage and stage.ir:
            views = ", ".join(f"{k} ({v.count(chr(10)) + 1} lines)" for k, v in stage.ir.items())
            print(f"   IR views: {views}")
        # As the compiler view does: a listing cut at its size limit carries a note on the
        # whole listing's features, and the badges come from it.
        noted = noted_features(sass)
        uses = noted if noted is not None else sass_features(sass)
        badges = {u.feature.key: u.count for u in uses if u.count}
        if noted is not None:
            print("   listing cut at its size limit: badges from its note, raw counts of the cut")
        for key, pattern in RAW.items():
            raw = raw_count(sass, pattern)
            if raw or key in badges:
                agree = "agree" if raw == badges.get(key, 0) else "DIFFER"
                print(f"   {key:<16} badge {badges.get(key, 0):>5}  raw {raw:>5}  {agree}")
        if not badges:
            print("   no badge")


if __name__ == "__main__":
    main()
