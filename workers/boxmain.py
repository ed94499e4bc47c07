"""`python -m kplay.workers.boxmain FD LIMITS_JSON [READY_FD]`: a learner's box under limits.

The box itself is `kernels.learnerbox`; this entry point applies the same limits as an
evaluation child (hard limits that cannot be raised again, an address-space cap measured
after warm-up, a CPU budget) before any learner code can arrive.
"""

from __future__ import annotations

import faulthandler
import os
import sys

from kplay.workers.limits import Limits, apply_static_limits, cap_address_space, set_cpu_budget


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    limits = Limits.model_validate_json(args[1])
    apply_static_limits(limits)
    faulthandler.enable()
    from kplay.kernels import learnerbox
    from kplay.kernels.hardware import has_cuda_gpu

    learnerbox.warm_up()
    cap_address_space(limits, has_cuda_gpu())
    set_cpu_budget(limits)
    if len(args) > 2:  # tells the parent the imports are done; nothing learner-made yet
        ready = int(args[2])
        os.write(ready, b"R")
        os.close(ready)
    learnerbox.serve(int(args[0]))


if __name__ == "__main__":
    main()
