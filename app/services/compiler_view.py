"""The compiler panel of a run: its listings row by row with their source lines, the
Hopper-feature badges its SASS earns, the resource report and the theoretical occupancy.

Built on demand (app.routers.compiler), never inside the run card: the listings are the
largest part of a result, and most cards are never opened this far.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kplay.app import format as fmt
from kplay.app.db.models import Run
from kplay.kernels import launch as launch_mod
from kplay.kernels.backends.lineinfo import LineMap, line_map
from kplay.kernels.models import CompileStage, LaunchOverride, Resources, RunResult
from kplay.kernels.occupancy import Occupancy, occupancy
from kplay.kernels.problem import ProblemSpec
from kplay.kernels.sassfeatures import (
    Feature,
    FeatureUse,
    lost_features,
    noted_features,
    opcode_counts,
    ptxas_advice,
    sass_features,
)

# Every listing the panel knows, in the order a compiler lowers through them.
TITLES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR", "ptx": "PTX", "sass": "SASS"}
EXPECTED = {
    "cuda": ("ptx", "sass"),
    "triton": ("ttir", "ttgir", "llir", "ptx", "sass"),
    "numba-cuda": ("ptx", "sass"),
}
TOP_OPCODES = 12


@dataclass(frozen=True)
class Row:
    text: str
    line: int | None = None  # the learner's line the row computes
    via: str = ""  # the learner's lines that inlined it, space-separated
    feature: str = ""  # the key of the feature this instruction shows, if any

    @property
    def note(self) -> bool:
        """A comment row (nvdisasm's line marks, PTX's comments): shown muted."""
        return self.text.lstrip().startswith("//")


@dataclass
class Listing:
    key: str
    title: str
    rows: list[Row]
    mapped_lines: int  # how many of the learner's lines have rows here

    @property
    def size(self) -> str:
        return f"{len(self.rows)} lines"


@dataclass(frozen=True)
class Badge:
    key: str
    label: str
    meaning: str
    evidence: str
    hopper: bool
    count: int
    functions: str


@dataclass(frozen=True)
class SourceRow:
    number: int
    text: str


@dataclass(frozen=True)
class ResourceRow:
    kernel: str
    registers: str
    spills: str
    shared: str
    stack: str
    arch: str


@dataclass
class CompilerView:
    run_id: str
    backend: str
    compiler: str
    ok: bool
    source: list[SourceRow] = field(default_factory=list)
    listings: list[Listing] = field(default_factory=list)
    missing: list[tuple[str, str]] = field(default_factory=list)  # (title, why)
    badges: list[Badge] = field(default_factory=list)
    lost: list[Feature] = field(default_factory=list)
    advice: list[tuple[str, str]] = field(default_factory=list)
    resources: list[ResourceRow] = field(default_factory=list)
    occupancy: Occupancy | None = None
    occupancy_launch: str = ""  # the launch the occupancy is for, in words
    occupancy_note: str = ""  # why there is none
    note: str = ""  # how the listings were made, where it is not the run's own compile
    opcodes: list[tuple[str, int]] = field(default_factory=list)
    instructions: int = 0
    has_sass: bool = False
    sass_cut: bool = False

    @property
    def first(self) -> str:
        """The tab open at first: SASS where there is one, or the last listing."""
        keys = [lst.key for lst in self.listings]
        return "sass" if "sass" in keys else (keys[-1] if keys else "")

    @property
    def why_no_sass(self) -> str:
        return next((why for title, why in self.missing if title == "SASS"), "none was kept")

    @property
    def hopper_badges(self) -> list[Badge]:
        return [b for b in self.badges if b.hopper]

    @property
    def other_badges(self) -> list[Badge]:
        return [b for b in self.badges if not b.hopper]


def _result(run: Run) -> RunResult | None:
    if not run.result:
        return None
    try:
        return RunResult.model_validate(run.result)
    except ValueError:
        return None


def build(run: Run, catalog: Mapping[str, ProblemSpec]) -> CompilerView:
    result = _result(run)
    stage = result.compile if result is not None else None
    view = CompilerView(
        run_id=run.id,
        backend=run.backend,
        compiler=(stage.compiler or "") if stage else "",
        ok=bool(stage and stage.ok),
    )
    view.source = [SourceRow(i, t) for i, t in enumerate(run.source.splitlines(), 1)]
    if stage is None or not stage.ok:
        return view
    _listings(view, stage, len(view.source))
    if view.listings and view.backend == "triton" and "interpreter" in view.compiler:
        arch = _arch(stage) or "a GPU"
        view.note = (
            f"This run used Triton's interpreter; the listings, badges and resources are of "
            f"the same kernel compiled for {arch} without running, from its last test launch."
        )
    _features(view, stage)
    view.advice = ptxas_advice(stage.log)
    view.resources = [_resource_row(r) for r in stage.resources]
    if result is not None:
        _occupancy(view, run, result, stage, catalog)
    return view


# ---------------------------------------------------------------- listings


def _texts(stage: CompileStage) -> dict[str, str | None]:
    return {**stage.ir, "ptx": stage.ptx, "sass": stage.sass}


def _listings(view: CompilerView, stage: CompileStage, source_lines: int) -> None:
    texts = _texts(stage)
    features = {r: u.feature.key for u in sass_features(stage.sass or "") for r in u.rows}
    for key in TITLES:
        text = texts.get(key)
        if text:
            found = line_map(key, text)
            marks = features if key == "sass" else {}
            view.listings.append(_listing(key, text, found, source_lines, marks))
    wanted = EXPECTED.get(view.backend, ())
    for key in wanted:
        if not texts.get(key):
            view.missing.append((TITLES[key], _why_missing(key, view.backend, view.compiler)))


def _listing(
    key: str, text: str, found: LineMap, source_lines: int, marks: dict[int, str]
) -> Listing:
    def own(line: int | None) -> int | None:
        # The CUDA backend appends a reference to the kernel past the learner's last line.
        return line if line is not None and 1 <= line <= source_lines else None

    rows = []
    for i, line in enumerate(text.splitlines()):
        via = " ".join(str(v) for v in found.via.get(i, []) if own(v))
        shown = _compact_sass(line) if key == "sass" else line
        rows.append(Row(shown, own(found.lines.get(i)), via, marks.get(i, "")))
    mapped = len({r.line for r in rows if r.line})
    return Listing(key, TITLES[key], rows, mapped)


_SASS_ROW = re.compile(r"^\s+(/\*[0-9a-fA-F]{4,}\*/)( +)(.*)$")


def _compact_sass(line: str) -> str:
    """nvdisasm's row without its indent, and with 13 fewer columns before the opcode.

    The opcode sits in a fixed column, a predicate right before it; taking the same
    number of spaces from every instruction row keeps them aligned.
    """
    m = _SASS_ROW.match(line)
    if m is None:
        return line.strip()
    gap = m[2][min(13, len(m[2]) - 1) :]
    return f"{m[1]}{gap}{m[3]}"


def _why_missing(key: str, backend: str, compiler: str) -> str:
    if backend == "triton" and "interpreter" in compiler:
        return (
            "Triton ran this kernel in its interpreter (no GPU on the machine that ran it), "
            "so nothing was compiled; a run on a GPU shows this listing"
        )
    if backend == "numba-cuda" and "simulator" in compiler:
        return (
            "Numba's CUDA simulator ran this kernel as Python (no GPU on the machine that "
            "ran it), so nothing was compiled; a run on a GPU shows this listing"
        )
    if key == "sass":
        return "no disassembler (nvdisasm or cuobjdump) was found where the kernel was compiled"
    if key in ("ttir", "ttgir", "llir"):
        return "this run kept no intermediate listings (runs before they were kept, or a cache)"
    return "the compiler gave no listing for this run"


# ---------------------------------------------------------------- features


def _badge(use: FeatureUse) -> Badge:
    f = use.feature
    return Badge(
        f.key, f.badge, f.meaning, use.evidence, f.hopper, use.count, ", ".join(use.functions)
    )


def _arch(stage: CompileStage) -> str | None:
    archs = [r.arch for r in stage.resources if r.arch]
    if archs:
        return archs[0]
    m = re.search(r"\.target\s+(sm_\w+)", stage.sass or stage.ptx or "")
    return m[1] if m else None


def _features(view: CompilerView, stage: CompileStage) -> None:
    if not stage.sass:
        return
    view.has_sass = True
    # A cut listing's badges come from its note on the whole listing (sassfeatures).
    uses = noted_features(stage.sass)
    view.badges = [_badge(u) for u in (uses if uses is not None else sass_features(stage.sass))]
    # A listing cut at the size limit (toolkit_parse.truncate) may hold more past the cut.
    view.sass_cut = "[SASS truncated:" in stage.sass
    if not view.sass_cut:
        view.lost = lost_features(stage.ptx, stage.sass, _arch(stage))
    counts = opcode_counts(stage.sass)
    view.instructions = sum(counts.values())
    view.opcodes = counts.most_common(TOP_OPCODES)


# ---------------------------------------------------------------- resources


def _resource_row(r: Resources) -> ResourceRow:
    spills = "—"
    if r.spill_stores_bytes is not None or r.spill_loads_bytes is not None:
        spills = f"{fmt.bytes_(r.spill_stores_bytes)} / {fmt.bytes_(r.spill_loads_bytes)}"
    return ResourceRow(
        kernel=r.kernel or "—",
        registers=str(r.registers) if r.registers is not None else "—",
        spills=spills,
        shared=fmt.bytes_(r.shared_bytes),
        stack=fmt.bytes_(r.stack_frame_bytes),
        arch=r.arch or "—",
    )


def _occupancy(
    view: CompilerView,
    run: Run,
    result: RunResult,
    stage: CompileStage,
    catalog: Mapping[str, ProblemSpec],
) -> None:
    res = stage.resources[0] if stage.resources else None
    if res is None or res.registers is None:
        view.occupancy_note = "the resource report has no register count"
        return
    found = _launch_shape(run, result, stage, catalog)
    if isinstance(found, str):
        view.occupancy_note = found
        return
    threads, dynamic, words = found
    shared = (res.shared_bytes or 0) + dynamic
    view.occupancy = occupancy(threads, res.registers, shared, _arch(stage))
    if view.occupancy is None:
        view.occupancy_note = f"no SM limits known for {_arch(stage) or 'this target'}"
        return
    view.occupancy_launch = f"{words}, {res.registers} registers, {fmt.bytes_(shared)} shared"


def _launch_shape(
    run: Run, result: RunResult, stage: CompileStage, catalog: Mapping[str, ProblemSpec]
) -> tuple[int, int, str] | str:
    """(threads per block, dynamic shared bytes, in words), or why it is unknown."""
    problem = catalog.get(run.problem)
    default = problem.launch.get(run.backend) if problem is not None else None
    if problem is None or default is None:
        return "the problem's launch is unknown"
    try:
        override = LaunchOverride.model_validate(run.launch) if run.launch else None
        plan = launch_mod.plan(default, run.source, override)
        params = (result.timing.params if result.timing else None) or (
            problem.benchmarks[0].params if problem.benchmarks else {}
        )
        spec = launch_mod.resolve(plan, params)
    except (ValueError, launch_mod.LaunchError) as exc:
        return f"the launch could not be worked out: {exc}"
    if run.backend == "triton":
        warps = spec.num_warps or _logged_warps(stage.log)
        if not warps:
            return "the number of warps is unknown"
        return warps * 32, 0, f"num_warps={warps} ({warps * 32} threads)"
    if not spec.block:
        return "the launch names no block"
    threads = math.prod(int(b) for b in spec.block)
    shape = "×".join(str(int(b)) for b in spec.block)
    return threads, int(spec.shared_mem_bytes), f"blocks of {shape} ({threads} threads)"


def _logged_warps(log: str) -> int | None:
    m = re.search(r"num_warps=(\d+)", log)
    return int(m[1]) if m else None
