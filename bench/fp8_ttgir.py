"""Where Triton waits on its wgmmas in the FP8 sweep's kernel, read from the TTGIR (no GPU).

For each SCALE mode of bench/fp8_sweep_kernel.py, compiles the kernel for sm_90 with
`triton.compile` and prints the `pendings` of every `ttng.warp_group_dot_wait` it placed:
0 means the warpgroup waits for its last wgmma before it goes on (nothing of the tensor
cores' work overlaps the next instructions); 1 means one group of wgmmas stays in flight
across the K loop's iterations, which is how the per-tensor form keeps the tensor cores fed.

    python bench/fp8_ttgir.py
    python bench/fp8_ttgir.py --json bench/results/fp8_ttgir.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# (SCALE, BLOCK_M, BLOCK_N, num_warps, num_stages, persistent): the sweep's best of each mode
CASES = [
    (0, 128, 128, 8, 4, True),
    (3, 128, 128, 8, 4, True),
    (1, 128, 256, 8, 3, False),
    (2, 128, 256, 8, 4, True),
]


def inspect(scale: int, bm: int, bn: int, warps: int, stages: int, persistent: bool) -> dict:
    import triton
    from fp8_sweep_kernel import gemm_fp8_sweep as kernel
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sig = {"a_ptr": "*fp8e4nv", "b_ptr": "*fp8e4nv", "a_scale_ptr": "*fp32",
           "b_scale_ptr": "*fp32", "c_ptr": "*bf16"}  # fmt: skip
    sig.update(dict.fromkeys(("M", "N", "K"), "i32"))
    const = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": 128, "GROUP_M": 8,
             "PERSISTENT": persistent, "WS": False, "NUM_PROGS": 132, "SCALE": scale}  # fmt: skip
    sig.update(dict.fromkeys(const, "constexpr"))
    names = [p.name for p in kernel.params]
    src = ASTSource(kernel, sig, {(names.index(n),): v for n, v in const.items()}, {})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps, "num_stages": stages})  # fmt: skip
    ttgir = compiled.asm["ttgir"]
    return {
        "scale_mode": scale,
        "config": f"{bm}x{bn}x128 w{warps} s{stages}" + (" persistent" if persistent else ""),
        "triton": triton.__version__,
        "wgmma_ops": len(re.findall(r"ttng\.warp_group_dot ", ttgir)),
        "wait_pendings": [
            int(p) for p in re.findall(r"warp_group_dot_wait.*?pendings = (\d+)", ttgir)
        ],  # fmt: skip
        "shared_bytes": compiled.metadata.shared,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--json", type=Path)
    args = p.parse_args(argv)
    rows = [inspect(*case) for case in CASES]
    for r in rows:
        print(json.dumps(r))
    if args.json:
        args.json.write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
