"""Hidden grading cases: test cases beyond a problem's own that a grading run checks.

Someone who grades writes them in the notation of the problem's problem.toml, one
`[[tests]]` table per case with its `name`, its `params` and an optional `seed`. `parse` and
`validate` check them against the problem (its parameters, their kinds, the bytes a case may
hold, and the problem's own input generator, which draws the case once) and name the case and
the field of anything wrong. A RunJob carries the valid ones (RunJob.hidden_cases); the
evaluator checks them after the problem's own cases (`cases_of`, `check_case`), on the run's
secret seeds, and reports each one without its shape: the check says right or wrong and which
output, and a failure on it carries no text of the kernel's, which could print its sizes.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Callable
from typing import Any

from kplay.kernels.arrays import ArrayOps
from kplay.kernels.backends.base import DeferredCompileError, KernelError
from kplay.kernels.check import InputError, array_bytes, generate_inputs, run_case, shape_of
from kplay.kernels.formula import FormulaError
from kplay.kernels.launch import LaunchError
from kplay.kernels.models import CaseCheck, GradingCase, RunJob
from kplay.kernels.problem import Case, ProblemSpec
from kplay.kernels.remote import BoxFailure, LearnerException
from kplay.kernels.seeds import RunSeeds

MAX_CASES = 8
MAX_TEXT = 8000  # characters of TOML
MAX_NAME = 60
MAX_CASE_BYTES = 64 << 20  # the bytes of one case's arrays, inputs and outputs together
MAX_INT = 2**31 - 1  # a case parameter reaches the kernel as a 32-bit integer
MAX_SEED = 2**31 - 1
# A hidden case's seed is offset from the problem's own, so that the two never share inputs.
SEED_OFFSET = 1 << 32
KEYS = ("name", "params", "seed")
NOTATION = 'write each case as a [[tests]] table: name = "...", params = { ... }, seed = 1'


class HiddenCaseError(ValueError):
    """Hidden cases refused; the message names the case and what is wrong with it."""


class HiddenCase(Case):
    """A hidden case as the evaluator checks it: named by its place, never by its shape."""


class HiddenCaseFailure(RuntimeError):
    """The kernel failed on a hidden case; what it said is withheld."""


# ---------------------------------------------------------------- reading and checking


def parse(text: str) -> list[dict[str, Any]]:
    """The `[[tests]]` tables of `text`, unchecked; an error for anything else."""
    if len(text) > MAX_TEXT:
        raise HiddenCaseError(f"hidden cases: at most {MAX_TEXT} characters of TOML")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HiddenCaseError(f"hidden cases: not valid TOML ({exc}); {NOTATION}") from None
    extra = sorted(set(data) - {"tests"})
    if extra:
        raise HiddenCaseError(f"hidden cases: unknown key {extra[0]!r}; {NOTATION}")
    tests = data.get("tests", [])
    if not isinstance(tests, list) or not all(isinstance(t, dict) for t in tests):
        raise HiddenCaseError(f"hidden cases: 'tests' must be tables; {NOTATION}")
    return tests


def validate(problem: ProblemSpec, raw: list[dict[str, Any]]) -> list[GradingCase]:
    """The cases as the problem takes them, or HiddenCaseError naming the first bad one."""
    if len(raw) > MAX_CASES:
        raise HiddenCaseError(f"hidden cases: at most {MAX_CASES} per exercise, not {len(raw)}")
    out: list[GradingCase] = []
    for index, entry in enumerate(raw, 1):
        case = _one(problem, entry, index)
        if any(c.name == case.name for c in out):
            raise HiddenCaseError(f"hidden case {case.name!r}: two cases have this name")
        out.append(case)
    return out


def parse_and_validate(problem: ProblemSpec, text: str) -> list[GradingCase]:
    return validate(problem, parse(text))


def _one(problem: ProblemSpec, entry: dict[str, Any], index: int) -> GradingCase:
    name = entry.get("name")
    where = f"hidden case {index}"
    if not isinstance(name, str) or not name.strip():
        raise HiddenCaseError(f'{where}: give it a name (name = "...")')
    if len(name) > MAX_NAME or any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise HiddenCaseError(f"{where}: a name is at most {MAX_NAME} printable characters")
    where = f"hidden case {name!r}"
    unknown = sorted(set(entry) - set(KEYS))
    if unknown:
        raise HiddenCaseError(f"{where}: unknown key {unknown[0]!r}; a case has {', '.join(KEYS)}")
    params = entry.get("params")
    if not isinstance(params, dict):
        shown = ", ".join(f"{p} = ..." for p in problem.params)
        raise HiddenCaseError(f"{where}: params is a table of the case's parameters: {{ {shown} }}")
    allowed = ", ".join(problem.params)
    stray = [k for k in params if k not in problem.params]
    if stray:
        raise HiddenCaseError(
            f"{where}: problem {problem.slug!r} has no parameter {stray[0]!r}; its parameters "
            f"are {allowed}"
        )
    missing = [p for p in problem.params if p not in params]
    if missing:
        raise HiddenCaseError(f"{where}: params needs {', '.join(missing)} (all of {allowed})")
    typed = {key: _value(problem, where, key, params[key]) for key in problem.params}
    seed = entry.get("seed", index)
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise HiddenCaseError(f"{where}: seed is a whole number from 0 to {MAX_SEED}")
    _fits(problem, where, typed, seed)
    return GradingCase(name=name.strip(), params=typed, seed=seed)


def _kind(problem: ProblemSpec, key: str) -> str:
    """bool, int or float: the parameter's argument type, else what the problem's cases use."""
    for arg in problem.args:
        if arg.name == key and arg.role == "param":
            if arg.dtype == "bool":
                return "bool"
            return "float" if arg.dtype.startswith(("float", "bfloat")) else "int"
    values = [c.params.get(key) for c in [*problem.tests, *problem.benchmarks]]
    return "float" if any(isinstance(v, float) for v in values) else "int"


def _value(problem: ProblemSpec, where: str, key: str, value: Any) -> int | float:
    kind = _kind(problem, key)
    if kind == "bool":
        if isinstance(value, bool) or value in (0, 1):
            return int(value)
        raise HiddenCaseError(f"{where}: {key} is true or false, not {value!r}")
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise HiddenCaseError(f"{where}: {key} is a number, not {value!r}")
        if not math.isfinite(value):
            raise HiddenCaseError(f"{where}: {key} must be finite")
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise HiddenCaseError(f"{where}: {key} is a whole number, not {value!r}")
    public = [c.params[key] for c in problem.tests if key in c.params]
    least = min([1, *[int(v) for v in public]])  # sizes start at 1 unless the problem's don't
    if not least <= value <= MAX_INT:
        raise HiddenCaseError(f"{where}: {key} = {value} is out of range ({least} to {MAX_INT})")
    return value


def _fits(problem: ProblemSpec, where: str, params: dict[str, int | float], seed: int) -> None:
    """The case's arrays within the limit, and drawn once by the problem's own generator."""
    try:
        dims = [d for a in problem.args if a.is_array for d in shape_of(problem, a.name, params)]
        size = array_bytes(problem, params)
    except (FormulaError, ZeroDivisionError, ValueError) as exc:
        raise HiddenCaseError(f"{where}: its array shapes cannot be worked out ({exc})") from None
    if any(d < 0 for d in dims):
        raise HiddenCaseError(f"{where}: an array would have a negative size")
    if size > MAX_CASE_BYTES:
        raise HiddenCaseError(
            f"{where}: its arrays hold {size / 2**20:.1f} MiB; a hidden case may hold at most "
            f"{MAX_CASE_BYTES >> 20} MiB"
        )
    try:
        generate_inputs(problem, dict(params), SEED_OFFSET + seed, memoise=False)
    except Exception as exc:  # noqa: BLE001 - the generator's own refusal, in its words
        text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise HiddenCaseError(
            f"{where}: problem {problem.slug!r} cannot draw inputs for these params: {text}"
        ) from None


# ---------------------------------------------------------------- in the evaluator


def _simulates(problem: ProblemSpec, params: dict[str, int | float]) -> bool:
    """Small enough for a simulator: no larger than the largest public case it runs."""
    sizes = [array_bytes(problem, c.params) for c in problem.tests if c.simulate]
    return array_bytes(problem, params) <= max(sizes, default=0)


def cases_of(problem: ProblemSpec, job: RunJob) -> list[Case]:
    """The cases a run checks: the problem's own, then the job's hidden ones."""
    hidden: list[Case] = [
        HiddenCase(
            name=f"hidden-{i}",
            params=dict(c.params),
            seed=SEED_OFFSET + c.seed,
            simulate=_simulates(problem, c.params),
        )
        for i, c in enumerate(job.hidden_cases, 1)
    ]
    return [*problem.tests, *hidden]


def check_case(
    problem: ProblemSpec,
    case: Case,
    ops: ArrayOps,
    launch_for: Callable[[dict[str, int | float]], Callable[[list[Any]], None]],
    seeds: RunSeeds,
) -> CaseCheck:
    """One case checked; a hidden one reported without its shape, whatever happens."""
    if not isinstance(case, HiddenCase):
        check, _ = run_case(
            problem, case, ops, launch_for(case.params), seeds.case(case), seeds.memoise
        )
        check.seed = seeds.shown(case)
        return check
    try:
        check, _ = run_case(problem, case, ops, launch_for(case.params), seeds.case(case), False)
    except DeferredCompileError:
        raise  # a compile log says nothing of the case
    except Exception as exc:  # noqa: BLE001 - each kind again, its text withheld
        raise _withheld(exc, case.name) from None
    message = None
    if not check.ok:
        message = (
            f"wrong output{f' ({check.output})' if check.output else ''} on this hidden "
            "grading case; its shape, inputs and mismatches are not shown"
        )
    return CaseCheck(
        name=case.name, params={}, ok=check.ok, output=check.output, message=message, hidden=True
    )


def _withheld(exc: Exception, name: str) -> Exception:
    """The same kind of failure, without a word of what the kernel or its launch said."""
    what = f"on hidden grading case {name} (its message is withheld: it could tell the case)"
    if isinstance(exc, LearnerException):
        return LearnerException(f"{exc.type_name} {what}", exc.type_name)
    if isinstance(exc, BoxFailure):
        return BoxFailure(f"the kernel's box failed {what}")
    if isinstance(exc, KernelError | LaunchError):
        return KernelError(f"the launch failed {what}")
    if isinstance(exc, InputError):
        return InputError(f"the problem's generator failed {what}")
    return HiddenCaseFailure(f"{type(exc).__name__} {what}")
