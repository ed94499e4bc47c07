"""CPU benchmark cases sized from the host's last-level cache, so that they measure DRAM.

A CPU keeps whatever fits in its caches between the repetitions of a timed case: a case
that fits (or half fits) in the last-level cache is served partly from it, moves its bytes
faster than DRAM can deliver them, and reads above 100% of a roofline whose memory roof
was measured in DRAM. So every benchmark case meant for the `numba-cpu` backend either

- grows with the host (`scale` in problem.toml): the loader multiplies the named params by
  one common factor, each rounded up to a multiple of `multiple_of`, until the case's
  bytes (the problem's `bytes` formula) reach LLC_MULTIPLE times the last-level cache,
  every instance of it together (kernels.cpucaches). The written params are the floor. A
  host whose cache would make a case larger than KPLAY_CPU_CASE_MAX_MB gets the largest
  case under that cap instead, and the case records that it was capped (its card says so);
- or says in words which cache level it measures (`measures`): a case kept in a cache on
  purpose (a compute-bound one, or one whose DRAM-sized run would take too long), whose
  card says where its data lives.

The loader (kernels.catalog) replaces each scaled case by its sized copy, so the rest of
the engine sees concrete params, and a case keeps its name on every host.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from kplay.kernels import formula
from kplay.kernels.problem import Case, CaseSizing, ProblemSpec

# A case at least this many times the last-level cache: a cache keeps little of an array
# streamed through it that is several times its size, so nearly every byte comes from DRAM.
LLC_MULTIPLE = 4
CPU_BACKEND = "numba-cpu"


def host_llc_bytes() -> int:
    """This host's last-level cache, every instance together (kernels.cpucaches)."""
    from kplay.kernels import cpucaches, hardware

    return cpucaches.last_level_bytes(hardware.cpu().caches)


def is_cpu_case(problem: ProblemSpec, case: Case) -> bool:
    """Whether a benchmark case is meant for the CPU backend."""
    if case.backends is None:
        return CPU_BACKEND in problem.backends
    return CPU_BACKEND in case.backends


def case_bytes(problem: ProblemSpec, params: dict[str, int | float]) -> int:
    return int(formula.evaluate(problem.bytes, params))


def _grown(case: Case, factor: float) -> dict[str, int | float]:
    """The case's params with each scaled param times `factor`, rounded up to its multiple
    and held to its `most`."""
    assert case.scale is not None
    step = case.scale.multiple_of
    params = dict(case.params)
    for name in case.scale.params:
        written = int(case.params[name])
        if math.isinf(factor):  # as large as its `most` allows (only asked when it has one)
            grown = case.scale.most[name]
        else:
            grown = max(written, math.ceil(written * factor / step) * step)
        params[name] = min(grown, case.scale.most.get(name, grown))
    return params


def _boundary(crosses: Callable[[float], bool], low: float, high: float) -> tuple[float, float]:
    """Narrow (low, high], where `crosses` is false at low and true at high, to a hair."""
    for _ in range(100):
        if high - low <= high * 1e-9:
            break
        mid = (low + high) / 2
        if crosses(mid):
            high = mid
        else:
            low = mid
    return low, high


def size_case(problem: ProblemSpec, case: Case, llc_bytes: int, cap_bytes: int) -> Case:
    """A scaled case's copy with params sized for a last-level cache of `llc_bytes`.

    The smallest growth that reaches LLC_MULTIPLE x llc_bytes; where that exceeds
    `cap_bytes`, the largest growth that stays under it (never below the written params).
    A case without `scale` comes back unchanged.
    """
    if case.scale is None:
        return case
    target = LLC_MULTIPLE * llc_bytes
    written = case_bytes(problem, case.params)
    k = len(case.scale.params)

    def size(factor: float) -> int:
        return case_bytes(problem, _grown(case, factor))

    def first(crosses: Callable[[float], bool]) -> tuple[float, float]:
        """(low, high) around the factor where `crosses` turns true (false at 1)."""
        high = max(2.0, (target / max(written, 1)) ** (1.0 / k))
        while not crosses(high):
            high *= 2
        return _boundary(crosses, 1.0, high)

    # With every scaled param at its `most` (where each has one), the case can grow no more.
    most = case.scale.most
    largest = size(math.inf) if all(n in most for n in case.scale.params) else None
    capped = False
    if written >= target:
        params = dict(case.params)
    elif target <= cap_bytes and (largest is None or largest >= target):
        params = _grown(case, first(lambda f: size(f) >= target)[1])
    else:
        capped = True
        if largest is not None and largest <= cap_bytes:
            params = _grown(case, math.inf)
        elif written > cap_bytes:
            params = dict(case.params)
        else:
            params = _grown(case, first(lambda f: size(f) > cap_bytes)[0])
    sized = case.model_copy(update={"params": params})
    sized._sizing = CaseSizing(
        llc_bytes=llc_bytes,
        target_bytes=target,
        cap_bytes=cap_bytes,
        bytes=case_bytes(problem, params),
        capped=capped,
        written=dict(case.params),
    )
    return sized


def size_benchmarks(
    problem: ProblemSpec, llc_bytes: int | None = None, cap_bytes: int | None = None
) -> list[Case]:
    """The problem's benchmark cases with every scaled one sized for this host."""
    if llc_bytes is None:
        llc_bytes = host_llc_bytes()
    if cap_bytes is None:
        from kplay.config import EngineSettings

        cap_bytes = EngineSettings().cpu_case_max_bytes
    return [size_case(problem, case, llc_bytes, cap_bytes) for case in problem.benchmarks]
