"""Build kernel images as a learner's box does, in a process of their own.

`python -m tests.kernels.artifact_builds` reads a JSON list of jobs on stdin, each
{"backend", "source", "kernel", "target_cc", "variants": [Variant JSON]}, and writes a JSON
list of answers: {"stage", "params", "builds": [{"artifact"} | {"error", "stage"}]}.
`build_in_box()` runs it with the environment a worker gives a box on a GPU host:
Numba's simulator and Triton's interpreter off, so the real compilers build for the
named compute capability (without a GPU, where numba-cuda needs no driver to compile).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def build_in_box(jobs: list[dict[str, Any]], tmp: Path) -> list[dict[str, Any]]:
    env = {
        **os.environ,
        "NUMBA_ENABLE_CUDASIM": "0",
        "TRITON_INTERPRET": "0",
        "TRITON_CACHE_DIR": str(tmp / "triton-cache"),
        "KPLAY_BUILD_DIR": str(tmp / "work"),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.kernels.artifact_builds"],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _run(job: dict[str, Any], workdir: Path) -> dict[str, Any]:
    from kplay.kernels.artifact import Variant
    from kplay.kernels.backends.base import DeferredCompileError, KernelError, get_backend

    backend = get_backend(job["backend"])
    backend.target_cc = job["target_cc"]
    stage, exporter = backend.export(job["source"], job["kernel"], workdir)
    answer: dict[str, Any] = {"stage": stage.model_dump(mode="json"), "builds": []}
    answer["params"] = exporter.parameters() if exporter is not None else None
    for raw in job["variants"] if exporter is not None else []:
        try:
            artifact = exporter.build(Variant.model_validate(raw))
            answer["builds"].append({"artifact": artifact.model_dump(mode="json")})
        except DeferredCompileError as exc:
            answer["builds"].append(
                {"error": "compile", "stage": exc.stage.model_dump(mode="json")}
            )
        except KernelError as exc:
            answer["builds"].append({"error": "kernel", "message": str(exc)})
    return answer


def main() -> None:
    jobs = json.loads(sys.stdin.read())
    workdir = Path(os.environ.get("KPLAY_BUILD_DIR") or tempfile.mkdtemp(prefix="kplay-builds-"))
    answers = [_run(job, workdir / str(i)) for i, job in enumerate(jobs)]
    sys.stdout.flush()
    print("\n" + json.dumps(answers))


if __name__ == "__main__":
    main()
