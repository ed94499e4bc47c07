"""What a SASS listing shows a kernel really uses: Hopper's tensor-core, copy and cluster
instructions, and the older paths they replace.

A CUDA source may ask for a feature that the machine code does not have: ptxas drops a
`setmaxnreg` it cannot honour, a kernel built for sm_90 (not sm_90a) has no `wgmma`, a
WMMA call becomes `HMMA`, not `HGMMA`. So the badges come from the SASS alone; the PTX
only says what was asked for, to point out what got lost on the way.

Pure text work: nvdisasm's, cuobjdump's and Triton's listings in, findings out.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

# ---------------------------------------------------------------- reading a listing

_ADDRESS = r"/\*[0-9a-fA-F]{4,}\*/"  # nvdisasm and cuobjdump: /*0380*/
_CONTROL = r"[-\d]{2}:[-\d]:[-\d]:[-Y]:\d+"  # Triton's listing: --:-:0:-:1
_INSTRUCTION = re.compile(
    rf"^\s*(?:{_ADDRESS}|{_CONTROL})\s+\{{?\s*"
    r"(?P<pred>@!?U?P(?:[0-6]|T)\s+)?"
    r"(?P<op>[A-Z][A-Z0-9_]*(?:\.[A-Za-z0-9_]+)*)(?P<rest>[^;]*)"
)
_FUNCTION = re.compile(r"^(?:\.text\.(?P<elf>[\w$.@]+):\s*$|\s*Function\s*:\s*(?P<listed>\S+))")


@dataclass(frozen=True)
class Instruction:
    row: int  # 0-based line of the listing
    function: str
    opcode: str  # the whole mnemonic: HGMMA.64x8x16.F32
    operands: str

    @property
    def base(self) -> str:
        """The mnemonic without modifiers: HGMMA, UTMALDG, HFMA2 (of HFMA2.MMA)."""
        return self.opcode.split(".", 1)[0]


def instructions(sass: str) -> list[Instruction]:
    """Every instruction of a listing, with its row and the function it belongs to."""
    found: list[Instruction] = []
    function = ""
    for row, line in enumerate(sass.splitlines()):
        if head := _FUNCTION.match(line):
            function = head["elf"] or head["listed"] or function
            continue
        if insn := _INSTRUCTION.match(line):
            found.append(Instruction(row, function, insn["op"], insn["rest"].strip()))
    return found


def opcode_counts(sass: str) -> Counter[str]:
    """How many times each base mnemonic occurs."""
    return Counter(i.base for i in instructions(sass))


# ---------------------------------------------------------------- the features


@dataclass(frozen=True)
class Feature:
    key: str
    badge: str  # what the badge says
    meaning: str  # one sentence for the badge's title
    hopper: bool  # new with Hopper (sm_90 / sm_90a)
    matches: Callable[[Instruction], bool]
    # PTX that asks for the feature (a regular expression); None: nothing asks for it.
    ptx: str | None = None


def _base_in(*names: str) -> Callable[[Instruction], bool]:
    return lambda i: i.base in names


def _prefix(*prefixes: str) -> Callable[[Instruction], bool]:
    return lambda i: i.base.startswith(prefixes)


def _remote_shared(i: Instruction) -> bool:
    """st.async / red.async, or the byte permute that `mapa` becomes.

    `mapa` puts a block's rank into the top byte of a shared-memory address; ptxas writes
    that as PRMT with selector 0x654 (the address's low three bytes, then the rank), and
    the access itself as a generic LD/ST through that address.
    """
    if i.base in ("STAS", "REDAS"):
        return True
    return i.base in ("PRMT", "UPRMT") and re.search(r",\s*0x654\s*,", i.operands) is not None


FEATURES: tuple[Feature, ...] = (
    Feature("wgmma", "HGMMA", "warpgroup MMA (wgmma.mma_async): Hopper's tensor-core path",
            True, _base_in("HGMMA", "IGMMA", "QGMMA", "BGMMA"), r"\bwgmma\.mma_async"),
    Feature("tma_load", "UTMALDG", "TMA load: a tensor tile copied from global to shared "
            "memory by the Tensor Memory Accelerator", True, _base_in("UTMALDG"),
            r"\bcp\.async\.bulk\.tensor\.\d+d\.shared::\w+\.global"),
    Feature("tma_store", "UTMASTG", "TMA store or reduce: a tile written from shared to global "
            "memory by the Tensor Memory Accelerator", True, _base_in("UTMASTG", "UTMAREDG"),
            r"\bcp(?:\.reduce)?\.async\.bulk\.tensor\.\d+d\.global\.shared"),
    Feature("tma_prefetch", "UTMAPF", "TMA prefetch of a tensor tile into L2", True,
            _base_in("UTMAPF"), r"\bcp\.async\.bulk\.prefetch\.tensor"),
    Feature("bulk_copy", "UBLKCP", "bulk asynchronous copy (cp.async.bulk) of a contiguous "
            "range, completed on an mbarrier", True, _base_in("UBLKCP", "UBLKRED", "UBLKPF"),
            r"\bcp(?:\.reduce)?\.async\.bulk\.(?:shared|global|prefetch\.L2)"),
    Feature("mbarrier", "mbarrier", "transaction-count barriers in shared memory (SYNCS): "
            "what asynchronous copies complete on", True, _prefix("SYNCS"),
            r"\bmbarrier\.(?:try_wait|arrive|expect_tx|init)"),
    Feature("cluster_barrier", "cluster barrier", "a barrier across the blocks of a thread "
            "block cluster (barrier.cluster)", True, _prefix("UCGABAR", "CGABAR"),
            r"\bbarrier\.cluster"),
    Feature("dsmem", "DSMEM", "distributed shared memory: reading or writing another "
            "block's shared memory in the cluster", True, _remote_shared,
            r"\b(?:mapa|st\.async|red\.async)\b"),
    Feature("setmaxnreg", "setmaxnreg", "per-warpgroup register reallocation (setmaxnreg), "
            "as producer/consumer kernels use", True, _base_in("USETMAXREG"), r"\bsetmaxnreg\b"),
    Feature("mma_sync", "HMMA", "warp-level MMA (mma.sync, WMMA): the tensor-core path "
            "before Hopper, at a fraction of Hopper's rate", False,
            _base_in("HMMA", "IMMA", "DMMA", "BMMA"), r"\b(?:mma\.sync|wmma\.mma)"),
    Feature("cp_async", "LDGSTS", "per-thread asynchronous copy to shared memory (cp.async), "
            "Ampere's way to overlap loads", False, _base_in("LDGSTS"),
            r"\bcp\.async\.c[ag]\."),
    Feature("local_memory", "local memory", "loads and stores of local memory: spilled "
            "registers or an array the compiler could not keep in registers", False,
            _base_in("LDL", "STL")),
)  # fmt: skip

BY_KEY = {f.key: f for f in FEATURES}


@dataclass
class FeatureUse:
    feature: Feature
    count: int = 0
    opcodes: Counter[str] = field(default_factory=Counter)
    functions: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)

    @property
    def evidence(self) -> str:
        """'UTMALDG ×1, UTMASTG ×2': what was found, for the badge's title."""
        return ", ".join(f"{op} ×{n}" for op, n in self.opcodes.most_common())


def sass_features(sass: str) -> list[FeatureUse]:
    """The features the listing uses, in FEATURES' order, with where they occur."""
    uses = {f.key: FeatureUse(f) for f in FEATURES}
    for insn in instructions(sass):
        for feature in FEATURES:
            if feature.matches(insn):
                use = uses[feature.key]
                use.count += 1
                use.opcodes[insn.base] += 1
                use.rows.append(insn.row)
                if insn.function and insn.function not in use.functions:
                    use.functions.append(insn.function)
    return [u for u in uses.values() if u.count]


# A listing cut at its size limit (backends.toolkit_parse.truncate) ends with this note,
# which keeps the features of the whole listing: the badges must not lose what lies past
# the cut (a big kernel's HGMMA or HMMA often does).
WHOLE_NOTE = "// [features of the whole listing: "
_NOTED = re.compile(r"(?P<key>\w+) (?P<count>\d+) \((?P<ops>[^)]*)\)")


def whole_listing_note(sass: str) -> str:
    """The note a truncated listing carries: each feature's count and opcodes."""
    parts = [f"{u.feature.key} {u.count} ({u.evidence})" for u in sass_features(sass)]
    return WHOLE_NOTE + "; ".join(parts) + "]\n"


def noted_features(sass: str) -> list[FeatureUse] | None:
    """The features a truncated listing's note names, or None when it has no note."""
    at = sass.rfind(WHOLE_NOTE)
    if at < 0:
        return None
    line = sass[at + len(WHOLE_NOTE) :].split("\n", 1)[0]
    uses = []
    for m in _NOTED.finditer(line):
        if m["key"] not in BY_KEY:
            continue
        use = FeatureUse(BY_KEY[m["key"]], int(m["count"]))
        for op, n in re.findall(r"(\w+) ×(\d+)", m["ops"]):
            use.opcodes[op] = int(n)
        uses.append(use)
    return uses


def _ptx_code(ptx: str) -> str:
    """PTX without comments, so that a name in a comment asks for nothing."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", ptx, flags=re.S)


def ptx_requests(ptx: str) -> list[Feature]:
    """The features the PTX asks for, in FEATURES' order."""
    code = _ptx_code(ptx)
    return [f for f in FEATURES if f.ptx and re.search(f.ptx, code)]


def lost_features(ptx: str | None, sass: str | None, arch: str | None = None) -> list[Feature]:
    """What the PTX asks for and the SASS does not have (ptxas dropped or lowered it).

    Before sm_90 the Hopper features have no instructions of their own (an mbarrier is
    built from shared-memory atomics there), so only the older ones are compared.
    """
    if not ptx or not sass:
        return []
    used = {u.feature.key for u in sass_features(sass)}
    number = re.match(r"(?:sm|compute)_(\d+)", arch or "")
    before_hopper = number is not None and int(number[1]) < 90
    return [f for f in ptx_requests(ptx) if f.key not in used and not (before_hopper and f.hopper)]


# ---------------------------------------------------------------- ptxas's advice

_ADVICE = re.compile(r"^ptxas\s+(?:info|warning)\s*:\s*\((?P<code>C\d+)\)\s*(?P<text>.*\S)")


def ptxas_advice(log: str) -> list[tuple[str, str]]:
    """ptxas's numbered remarks, such as (C7508) 'setmaxnreg' ignored: (code, text)."""
    seen: list[tuple[str, str]] = []
    for line in log.splitlines():
        if (m := _ADVICE.match(line.strip())) and (m["code"], m["text"]) not in seen:
            seen.append((m["code"], m["text"]))
    return seen
