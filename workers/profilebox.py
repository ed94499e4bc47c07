"""Inside a profile's box: the learner's full run, started by Nsight Compute.

`workers/profiling.py` starts `ncu ... python -m kplay.workers.profilebox JOB RESULT LIMIT`
in a sandbox of its own, so ncu, the evaluation child it follows and the learner's code
share one box: ncu cannot follow a process into a second box (private IPC, /tmp and
/dev/shm), and here it need not. Inside, nothing is sandboxed again: the pool below runs
plain processes, which the box around them holds.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from kplay.kernels.models import RunJob
from kplay.workers.limits import Limits
from kplay.workers.runner import WorkerPool
from kplay.workers.sandbox import SandboxConfig

# What Nsight Compute sets in the environment to follow a program into its children.
PROFILER_ENV = ("LD_PRELOAD", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "NV_")


def main(argv: list[str] | None = None) -> int:
    job_file, result_file, limit = argv if argv is not None else sys.argv[1:]
    job = RunJob.model_validate_json(Path(job_file).read_text())
    passed = [name for name in os.environ if name.startswith(PROFILER_ENV)]
    limits = Limits(wall_timeout_s=float(limit), pass_env=passed)
    pool = WorkerPool(size=1, limits=limits, warm=False, sandbox=SandboxConfig(mode="off"))
    try:
        result = pool.run(job.model_copy(update={"mode": "full"}))
    finally:
        pool.close()
    Path(result_file).write_text(result.model_dump_json())
    return 0


if __name__ == "__main__":
    sys.exit(main())
