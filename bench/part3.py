"""Part III of the book, re-measured in one call: every kernel the part times, with its
baselines measured in the same call.

Runs, one after the other on the same GPU:

- `bench/part3_rows.py`: softmax, LayerNorm and bias + GELU through the engine, against
  the copy bandwidth and torch's own kernels;
- `bench/attention_fwd.py`: the book's attention kernels (Triton and CUDA C++) through the
  engine, against SDPA's FlashAttention, memory-efficient and cuDNN backends.

Each script prints its own Markdown table (and writes its JSON, with the device, to --out);
this one prints both tables under one heading with the date and the commit, and exits non-zero if
either failed.

    python bench/part3.py [--out DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (
    ("Row kernels", ["bench/part3_rows.py"], "part3_rows.json", "--out"),
    ("Attention forward", ["bench/attention_fwd.py"], "attention_fwd.json", "--json-out"),
)


def commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def table_lines(output: str) -> list[str]:
    """The Markdown table rows a script printed (its progress lines left out)."""
    return [line for line in output.splitlines() if line.startswith("|")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    print(f"## Part III re-measured ({when}, commit {commit()}, `python bench/part3.py`)")
    failed = 0
    for title, script, json_name, flag in SCRIPTS:
        command = [sys.executable, *script, flag, str(args.out / json_name)]
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        print(f"\n### {title} (`{' '.join(script)}`)\n")
        rows = table_lines(done.stdout)
        print("\n".join(rows) if rows else "(no table)")
        if done.returncode:
            failed += 1
            print(f"\n{script[0]} exited {done.returncode}: {done.stderr.strip()[-800:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
