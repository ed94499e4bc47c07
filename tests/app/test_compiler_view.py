"""The compiler panel: fetched apart from the card, with badges, occupancy and source lines.

The runs carry real nvcc output: the listings of tests/kernels/data/sass, made by the
engine's nvcc report for sm_90a and read by hand (tests/kernels/test_sassfeatures.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from kplay.kernels.models import CompileStage, Resources, RunJob, RunResult, RunState
from tests.app.fakes import FakeExecutor

DATA = Path(__file__).resolve().parents[1] / "kernels" / "data" / "sass"
CELL = "/cells/ch02-vadd-gpu/runs"
PAGE = {"HX-Request": "true"}
ADVICE = (
    "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; "
    "unable to determine register count at entry.\n"
)


Script = Callable[[RunJob], RunResult]


def compiled(stem: str, registers: int, shared: int, log: str = "") -> Script:
    """A compile-only CUDA run whose stage holds the nvcc report of data/sass/<stem>."""

    def script(job: RunJob) -> RunResult:
        stage = CompileStage(
            ok=True,
            log=log,
            compiler="nvcc 13.0 (sm_90a)",
            resources=[
                Resources(
                    kernel=stem,
                    registers=registers,
                    shared_bytes=shared,
                    arch="sm_90a",
                    spill_stores_bytes=0,
                    spill_loads_bytes=0,
                    stack_frame_bytes=0,
                )
            ],  # fmt: skip
            ptx=(DATA / f"{stem}.ptx").read_text(),
            sass=(DATA / f"{stem}.sass").read_text(),
        )
        return RunResult(
            job_id=job.job_id, problem=job.problem, backend=job.backend,
            state=RunState.compiled, compile=stage,
        )  # fmt: skip

    return script


def run_of(client: TestClient, stem: str, backend: str = "cuda") -> tuple[str, str]:
    """Start a run of data/sass/<stem>.cu; (its id, its card)."""
    source = (DATA / f"{stem}.cu").read_text()
    reply = client.post(CELL, data={"backend": backend, "source": source}, headers=PAGE)
    assert reply.status_code == 201, reply.text
    found = re.search(r'data-run-id="([0-9a-f]+)"', reply.text)
    assert found is not None
    return found.group(1), reply.text


def rows(html: str, **attrs: str) -> list[str]:
    """The listing rows whose attributes include `attrs`, as their text."""
    out = []
    for m in re.finditer(r'<span class="asm-row"([^>]*)>(.*?)</span>', html):
        if all(f'data-{k}="{v}"' in m.group(1) for k, v in attrs.items()):
            out.append(m.group(2))
    return out


@pytest.mark.parametrize("executor", [FakeExecutor(compiled("tma", 10, 4104))])
def test_the_card_links_the_panel_and_carries_no_listing(client: TestClient) -> None:
    run_id, card = run_of(client, "tma")
    assert f'data-url="/runs/{run_id}/compiler"' in card
    lines = (DATA / "tma.sass").read_text().count("\n") + 1
    assert f"SASS ({lines} lines)" in card and "PTX (" in card
    assert "UTMALDG" not in card and ".entry" not in card


@pytest.mark.parametrize("executor", [FakeExecutor(compiled("tma", 10, 4104))])
def test_a_tma_kernel_earns_its_badges_and_maps_its_rows(client: TestClient) -> None:
    run_id, _ = run_of(client, "tma")
    reply = client.get(f"/runs/{run_id}/compiler")
    assert reply.status_code == 200
    html = reply.text
    badges = re.findall(r'class="cbadge cbadge-(\w+)" data-feature="(\w+)"', html)
    assert badges == [
        ("hopper", "tma_load"),
        ("hopper", "tma_store"),
        ("hopper", "tma_prefetch"),
        ("hopper", "mbarrier"),
    ]
    # The TMA load is marked as such, and belongs to the line that ends its asm statement.
    (load,) = rows(html, feature="tma_load")
    assert "UTMALDG.2D" in load
    assert rows(html, line="28", feature="tma_load") == [load]
    # Every line of the learner's source is listed, one clickable row each.
    source = (DATA / "tma.cu").read_text().splitlines()
    assert len(re.findall(r'<li class="src-row" data-line="\d+"', html)) == len(source)
    assert ">Theoretical occupancy <strong>100 %</strong>" in html
    assert "held by <strong>warps</strong>" in html and "blocks of 256 (256 threads)" in html
    assert "No Hopper feature" not in html and "Asked for, not built" not in html


@pytest.mark.parametrize(
    "executor", [FakeExecutor(compiled("setmaxnreg_ignored", 22, 0, log=ADVICE))]
)
def test_setmaxnreg_that_ptxas_dropped_is_said_plainly(client: TestClient) -> None:
    run_id, _ = run_of(client, "setmaxnreg_ignored")
    html = client.get(f"/runs/{run_id}/compiler").text
    assert "No Hopper feature in this SASS" in html
    assert "Asked for, not built:</strong> the PTX has setmaxnreg" in html
    assert "ptxas C7508</span> Potential Performance Loss: &#39;setmaxnreg&#39; ignored" in html


@pytest.mark.parametrize("executor", [FakeExecutor(compiled("wmma", 22, 0))])
def test_wmma_is_the_older_tensor_core_path(client: TestClient) -> None:
    run_id, _ = run_of(client, "wmma")
    html = client.get(f"/runs/{run_id}/compiler").text
    assert re.findall(r'class="cbadge cbadge-(\w+)" data-feature="(\w+)"', html) == [
        ("other", "mma_sync")
    ]
    assert "No Hopper feature in this SASS" in html
    # HMMA comes from a CUDA header, inlined at the learner's wmma::mma_sync on line 15.
    assert all("HMMA" in r for r in rows(html, line="15", feature="mma_sync"))
    assert len(rows(html, feature="mma_sync")) == 2


def interpreted(job: RunJob) -> RunResult:
    stage = CompileStage(ok=True, compiler="triton 3.7.1 (interpreter)", log="loaded")
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend,
        state=RunState.done, compile=stage,
    )  # fmt: skip


@pytest.mark.parametrize("executor", [FakeExecutor(interpreted)])
def test_an_interpreted_triton_run_says_why_it_has_no_listings(client: TestClient) -> None:
    source = "import triton\n\n@triton.jit\ndef vector_add(a, b, out, n, BLOCK):\n    pass\n"
    reply = client.post(CELL, data={"backend": "triton", "source": source}, headers=PAGE)
    run_id = re.search(r'data-run-id="([0-9a-f]+)"', reply.text).group(1)  # type: ignore[union-attr]
    assert f'data-url="/runs/{run_id}/compiler"' in reply.text
    html = client.get(f"/runs/{run_id}/compiler").text
    for title in ("TTIR", "TTGIR", "LLVM IR", "PTX", "SASS"):
        assert f"<strong>{title}</strong>: Triton ran this kernel in its interpreter" in html
    assert "asm-row" not in html and "No SASS for this run" in html


@pytest.mark.parametrize("executor", [FakeExecutor(compiled("plain", 12, 0))])
def test_another_readers_run_is_no_run(app: FastAPI, client: TestClient) -> None:
    run_id, _ = run_of(client, "plain")
    with TestClient(app) as stranger:
        reply = stranger.get(f"/runs/{run_id}/compiler")
    assert reply.status_code == 404 and f"no run &#39;{run_id}&#39;" in reply.text
    assert client.get("/runs/0123456789abcdef0123456789abcdef/compiler").status_code == 404
    assert client.get(f"/runs/{run_id}/compiler").status_code == 200


TRITON_SOURCE = (
    "import triton\nimport triton.language as tl\n\n\n@triton.jit\n"
    "def vector_add(a, b, out, n, BLOCK: tl.constexpr):\n"
    "    x = tl.load(a)\n"
    "    tl.store(out, x)\n"
)
TRITON_LISTINGS = {
    "ttir": '  %x = tt.load %a : !tt.ptr<f32> loc(#loc2)\n#loc2 = loc("/w/kplay_src.py":7:8)\n',
    "ttgir": '  %x = tt.load %a : !tt.ptr<f32> loc(#loc2)\n#loc2 = loc("/w/kplay_src.py":7:8)\n',
    "llir": (
        "  %5 = load float, ptr addrspace(1) %0, align 4, !dbg !9\n"
        '!1 = !DIFile(filename: "kplay_src.py", directory: "/w")\n'
        '!4 = distinct !DISubprogram(name: "vector_add", scope: !1, file: !1, line: 6)\n'
        "!9 = !DILocation(line: 8, column: 4, scope: !4)\n"
    ),
}


def triton_built(job: RunJob) -> RunResult:
    """An interpreted Triton run whose listings come from a build for sm_90a."""
    stage = CompileStage(
        ok=True,
        compiler="triton 3.7.1 (interpreter)",
        resources=[Resources(kernel="vector_add", registers=26, shared_bytes=0, arch="sm_90a")],
        ir=TRITON_LISTINGS,
        ptx='\t.file\t1 "/w/kplay_src.py"\n\t.loc\t1 7 8\n\tld.global.b32 \t%r1, [%rd1];\n',
        sass="Function:vector_add\n--:-:0:-:1\tLDG.E R0, desc[UR4][R2.64];\n",
    )
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend,
        state=RunState.done, compile=stage,
    )  # fmt: skip


@pytest.mark.parametrize("executor", [FakeExecutor(triton_built)])
def test_an_interpreted_triton_run_shows_the_listings_of_its_gpu_build(client: TestClient) -> None:
    reply = client.post(CELL, data={"backend": "triton", "source": TRITON_SOURCE}, headers=PAGE)
    run_id = re.search(r'data-run-id="([0-9a-f]+)"', reply.text).group(1)  # type: ignore[union-attr]
    assert "Compiler view: TTIR (3 lines), TTGIR (3 lines), LLIR (5 lines), PTX (4 lines)" in (
        reply.text
    )
    html = client.get(f"/runs/{run_id}/compiler").text
    tabs = re.findall(r'role="tab" class="compiler-tab" data-listing="(\w+)"', html)
    assert tabs == ["ttir", "ttgir", "llir", "ptx", "sass"]
    assert "compiled for sm_90a without running" in html
    assert "<strong>TTIR</strong>" not in html  # nothing is missing
    for key, line in (("ttir", "7"), ("ttgir", "7"), ("llir", "8"), ("ptx", "7")):
        listing = html.split(f'role="tabpanel" data-listing="{key}"')[1].split("</pre>")[0]
        assert len(rows(listing, line=line)) == 1, key
    # num_warps from the problem's launch: 4 warps of 26 registers fill the SM.
    assert "num_warps=4 (128 threads)" in html


def simulated(job: RunJob) -> RunResult:
    stage = CompileStage(ok=True, compiler="numba-cuda 0.30.4 (simulator)")
    return RunResult(
        job_id=job.job_id, problem=job.problem, backend=job.backend,
        state=RunState.done, compile=stage,
    )  # fmt: skip


@pytest.mark.parametrize("executor", [FakeExecutor(simulated)])
def test_a_simulated_numba_run_says_why_it_has_no_listings(client: TestClient) -> None:
    source = "from numba import cuda\n\n@cuda.jit\ndef vector_add(a, b, out, n):\n    pass\n"
    reply = client.post(CELL, data={"backend": "numba-cuda", "source": source}, headers=PAGE)
    run_id = re.search(r'data-run-id="([0-9a-f]+)"', reply.text).group(1)  # type: ignore[union-attr]
    # Nothing to list: the card offers no panel, and the panel, asked all the same, says why.
    assert "data-compiler-panel" not in reply.text
    html = client.get(f"/runs/{run_id}/compiler").text
    for title in ("PTX", "SASS"):
        assert f"<strong>{title}</strong>: Numba&#39;s CUDA simulator ran this kernel" in html


def cut_listing(job: RunJob) -> RunResult:
    """A SASS past the size limit: the HGMMA is in the part kept, the rest is cut."""
    from kplay.kernels.backends.toolkit_parse import truncate

    sass = (DATA / "wgmma.sass").read_text() + "        /*ffff*/  NOP ;\n" * 20_000
    result = compiled("wgmma", 30, 2304)(job)
    assert result.compile is not None
    result.compile.sass = truncate(sass, 200_000, "SASS")
    result.compile.ptx = (DATA / "setmaxnreg_ignored.ptx").read_text()  # asks for setmaxnreg
    return result


@pytest.mark.parametrize("executor", [FakeExecutor(cut_listing)])
def test_a_cut_sass_claims_nothing_lost(client: TestClient) -> None:
    run_id, _ = run_of(client, "wgmma")
    html = client.get(f"/runs/{run_id}/compiler").text
    assert 'data-feature="wgmma"' in html
    assert "This SASS was cut at the listing's size limit" in html
    assert "Asked for, not built" not in html
