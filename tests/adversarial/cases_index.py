"""The adversarial cases as data: each file of tests/adversarial/cases/ and its header.

A case's header is its first comment lines (`#` in Python, `//` in CUDA C++), as
`key: value`, up to the first line that is not a comment:

    case:      what it tries, in a line
    class:     one of CLASSES
    problem:   the problem it submits to (vector_add unless it says otherwise)
    mode:      check (the default: the test cases only) or full (timed as well)
    expect:    the verdict it must get where its backend runs for real (a GPU for the
               GPU backends), or several separated by `|` where either is secure
    expect-simulated:  the verdict where the backend only simulates or compiles
               (Numba's CUDA simulator, Triton's interpreter, CUDA compile-only); a GPU
               backend's case without it needs a GPU
    evidence:  one check of the effect, repeated as needed (see EVIDENCE)
    needs:     process-limit, for a case that must not run where nothing bounds the
               number of a box's processes (a worker running as root, which the kernel
               exempts from RLIMIT_NPROC, without a cgroup)

The backend is the file's suffix, as in a problem's solutions folder.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kplay.kernels.problem import backend_for_path

CASES_DIR = Path(__file__).resolve().parent / "cases"

CLASSES = (
    "forged verdict",
    "harness patching",
    "stack walking",
    "early return",
    "cache",
    "work after return",
    "state for the next job",
    "secrets",
    "files",
    "network",
    "processes",
    "limits",
    "compile bomb",
    "reward hack",
)
VERDICTS = (
    "done",
    "wrong",
    "suspicious",
    "compile_error",
    "runtime_error",
    "timeout",
    "rejected",
)
# What the evidence lines may say, and what the test then checks after the run:
EVIDENCE = {
    "absent": "this host path does not exist after the run ($REPO, ~ expanded)",
    "output-has": "the job's output, message or compile log matches this regex",
    "output-lacks": "none of them contains this text ($CANARIES: any planted secret)",
    "message-has": "the verdict's message matches this regex",
    "message-lacks": "the verdict's message does not contain this text",
    "no-process": "no process of the host has this text in its command line after the run",
    "timed": "the run was timed (the harness's clock, not the kernel's)",
    "verified": "the run is verified: done, timed and judged against the device's ceilings",
    "not-verified": "the run is not verified (simulated or compile-only runs never are)",
    "next-job": "the next job in the same evaluation child (tests/adversarial/next_job"
    ".numba_cpu.py, which writes nothing and reports leftovers) gets this verdict and "
    "finds nothing left behind",
    "redis-lacks": "this key is not in the host's Redis (when there is one)",
    "within": "the run ended within this many seconds",
}
_HEADER = re.compile(r"^\s*(?:#|//)\s?(.*)$")
_FIELD = re.compile(r"^([a-z-]+):\s*(.*)$")


@dataclass(frozen=True)
class Case:
    path: Path
    backend: str
    title: str
    klass: str
    problem: str
    mode: str
    expect: tuple[str, ...]
    expect_simulated: tuple[str, ...] | None
    evidence: tuple[tuple[str, str], ...]
    requires: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def source(self) -> str:
        return self.path.read_text(encoding="utf-8")

    def needs(self, kind: str) -> list[str]:
        return [arg for what, arg in self.evidence if what == kind]


def _verdicts(text: str, where: Path) -> tuple[str, ...]:
    found = tuple(v.strip() for v in text.split("|"))
    bad = [v for v in found if v not in VERDICTS]
    if bad or not found:
        raise ValueError(f"{where.name}: unknown verdict(s) {bad or text!r}")
    return found


def parse(path: Path) -> Case:
    backend = backend_for_path(path)
    if backend is None:
        raise ValueError(f"{path.name}: not a kernel file (.cu, .numba_cpu.py, ...)")
    fields: dict[str, str] = {}
    evidence: list[tuple[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        header = _HEADER.match(line)
        if header is None:
            break
        field = _FIELD.match(header.group(1))
        if field is None:
            continue
        key, value = field.groups()
        if key == "evidence":
            what, _, arg = value.partition(" ")
            if what not in EVIDENCE:
                raise ValueError(f"{path.name}: unknown evidence {what!r}")
            evidence.append((what, arg.strip()))
        else:
            fields[key] = value.strip()
    for key in ("case", "class", "expect"):
        if key not in fields:
            raise ValueError(f"{path.name}: its header has no {key!r} line")
    if fields["class"] not in CLASSES:
        raise ValueError(f"{path.name}: unknown class {fields['class']!r}")
    mode = fields.get("mode", "check")
    if mode not in ("check", "full"):
        raise ValueError(f"{path.name}: mode is check or full, not {mode!r}")
    if set(fields.get("needs", "").split()) - {"process-limit"}:
        raise ValueError(f"{path.name}: unknown needs {fields['needs']!r}")
    simulated = fields.get("expect-simulated")
    return Case(
        path=path,
        backend=backend,
        title=fields["case"],
        klass=fields["class"],
        problem=fields.get("problem", "vector_add"),
        mode=mode,
        expect=_verdicts(fields["expect"], path),
        expect_simulated=None if simulated is None else _verdicts(simulated, path),
        evidence=tuple(evidence),
        requires=tuple(fields.get("needs", "").split()),
    )


def all_cases() -> list[Case]:
    return [parse(p) for p in sorted(CASES_DIR.iterdir()) if backend_for_path(p) is not None]
