"""Where a run's inputs come from: secret seeds for a real run, public ones on request.

A problem's cases carry fixed seeds in problem.toml, which learners can read. A kernel
that knew its inputs could carry their answers, so a real run never uses them: its base
seed is drawn per run from the operating system (`secrets`), every input of the run
(test cases, benchmark input sets, the re-check) derives from it, and nothing records it.
A reader who asks to see a failing case again gets the public seeds (RunJob.public_seeds):
the same inputs every time, named in the result, and a run that is never verified.
A grading run brings its base (RunJob.secret_seed, an assignment's hidden seed, drawn by
the server and never shown): its inputs are as secret as a real run's, and nothing records
that base either.

The harness's own random choices (which elements an input set changes, which input set
a repetition gets, which repetitions are checked) come from the same source, so in a
real run the kernel can predict none of them.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

import numpy as np

from kplay.kernels.models import RunJob
from kplay.kernels.problem import Case

# Offsets of the seeds a run derives from its base, one per purpose. The re-check's keeps
# its historical value, so public re-checks draw the inputs they always drew.
RECHECK_SEED_OFFSET = 7919
_PURPOSES = {"variant": 1, "positions": 2, "schedule": 3}
SECRET_BITS = 62


@dataclass(frozen=True)
class RunSeeds:
    base: int
    public: bool

    @classmethod
    def for_job(cls, job: RunJob) -> RunSeeds:
        if job.public_seeds:
            return cls(base=job.seed, public=True)
        if job.secret_seed is not None:  # a grading run's: its assignment's hidden seed
            return cls(base=job.secret_seed, public=False)
        return cls(base=secrets.randbits(SECRET_BITS), public=False)

    def case(self, case: Case) -> int:
        """The seed of a case's inputs: the base plus the case's own seed."""
        return self.base + case.seed

    def recheck(self, case: Case) -> int:
        """The seed of the fresh inputs of the re-check after timing."""
        return self.case(case) + RECHECK_SEED_OFFSET

    def derived(self, case: Case, purpose: str, index: int = 0) -> int:
        """A seed for one of the harness's own draws, unrelated to every other seed."""
        state = np.random.SeedSequence([self.case(case), _PURPOSES[purpose], index])
        return int(state.generate_state(1, np.uint64)[0] >> 1)

    def rng(self, case: Case, purpose: str, index: int = 0) -> np.random.Generator:
        return np.random.default_rng(self.derived(case, purpose, index))

    @property
    def memoise(self) -> bool:
        """Inputs and references are worth keeping only for seeds that come back."""
        return self.public

    def shown(self, case: Case) -> int | None:
        """What a result may say about a case's seed: the public one, or nothing."""
        return self.case(case) if self.public else None
