"""The compiler panel in a real browser: run a CUDA C++ kernel (compile-only without a GPU),
open the panel, click a source line and see its SASS rows marked, then its PTX rows."""

from __future__ import annotations

import sys

import pytest

from tests.browser.test_playground import (  # noqa: F401 - fixtures
    ARTIFACTS,
    RUN_LIMIT_MS,
    browser,
    server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CELL = "#cell-ch02-vadd-gpu"
KERNEL = """extern "C" __global__ void vector_add(const float* a, const float* b, float* out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float x = a[i];
        float y = b[i];
        out[i] = x + y;
    }
}
"""
ADD_LINE = 7  # out[i] = x + y;


def _nvcc_or_skip() -> None:
    from kplay.kernels.backends.cuda import CudaBackend
    from kplay.kernels.backends.toolkit_find import find_tool

    if find_tool("nvcc") is None or find_tool("nvdisasm") is None:
        pytest.skip("needs nvcc and nvdisasm for a compile-only CUDA run")
    if CudaBackend().capability().value == "unavailable":
        pytest.skip("CUDA C++ cannot be compiled here")


def _type_kernel(page: object, code: str) -> None:
    content = page.locator(f"{CELL} .cm-content")  # type: ignore[attr-defined]
    content.click()
    mod = "Meta" if sys.platform == "darwin" else "Control"
    page.keyboard.press(f"{mod}+a")  # type: ignore[attr-defined]
    page.keyboard.press("Delete")  # type: ignore[attr-defined]
    page.keyboard.insert_text(code)  # type: ignore[attr-defined]


def test_a_source_line_marks_its_sass_and_ptx_rows(server: str, browser: object) -> None:  # noqa: F811
    _nvcc_or_skip()
    context = browser.new_context(viewport={"width": 1366, "height": 1000})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/book/p1/first-gpu-kernel")
    page.wait_for_selector(f"{CELL} .cm-editor")
    page.click(f'{CELL} .kcell-tab[data-backend="cuda"]')
    _type_kernel(page, KERNEL)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(f'{CELL} [data-run-card][data-final="true"]', timeout=RUN_LIMIT_MS)
    card = page.locator(f"{CELL} [data-run-card]")
    assert card.get_attribute("data-state") in ("compiled", "done"), card.inner_text()

    # The listings are not in the card until the panel is opened.
    assert page.locator(f"{CELL} .asm-row").count() == 0
    page.locator(f"{CELL} .run-details details > summary", has_text="Compiler").first.click()
    panel = page.locator(f"{CELL} details[data-compiler-panel]")
    panel.locator("summary").click()
    page.wait_for_selector(f"{CELL} [data-compiler] .src-row", timeout=20_000)
    view = page.locator(f"{CELL} [data-compiler]")
    assert view.locator('.compiler-tab[aria-selected="true"]').inner_text().startswith("SASS")
    # A plain vector add: no Hopper feature, and the panel says so.
    assert view.locator(".cbadge-hopper").count() == 0
    assert "No Hopper feature" in view.inner_text()
    assert "Theoretical occupancy" in view.inner_text()

    view.locator(f'.src-row[data-line="{ADD_LINE}"]').click()
    marked = view.locator('.asm-listing[data-listing="sass"] .asm-row.is-pinned')
    assert marked.count() >= 1
    texts = " ".join(marked.all_inner_texts())
    assert "FADD" in texts or "STG" in texts, texts
    assert view.locator(f'.src-row.is-pinned[data-line="{ADD_LINE}"]').count() == 1
    # Only rows of that line are marked.
    lines = {marked.nth(i).get_attribute("data-line") for i in range(marked.count())}
    assert lines == {str(ADD_LINE)}
    view.screenshot(path=str(ARTIFACTS / "compiler-panel-sass.png"))

    # The PTX tab keeps the line: its own rows of that line are marked.
    view.locator('.compiler-tab[data-listing="ptx"]').click()
    ptx_marked = view.locator('.asm-listing[data-listing="ptx"] .asm-row.is-pinned')
    assert ptx_marked.count() >= 1
    assert "add.f32" in " ".join(ptx_marked.all_inner_texts())
    assert view.locator('.asm-listing[data-listing="sass"]').is_hidden()

    # Hovering another line previews it without losing the pinned one.
    view.locator('.src-row[data-line="3"]').hover()
    assert view.locator('.asm-listing[data-listing="ptx"] .asm-row.is-hover').count() >= 1
    assert ptx_marked.count() >= 1
    view.screenshot(path=str(ARTIFACTS / "compiler-panel-ptx.png"))

    # Clicking a listing row marks its source line.
    view.locator('.compiler-tab[data-listing="sass"]').click()
    row = view.locator('.asm-listing[data-listing="sass"] .asm-row[data-line="3"]').first
    row.click()
    assert view.locator('.src-row.is-pinned[data-line="3"]').count() == 1

    page.click("[data-theme-toggle]")
    view.screenshot(path=str(ARTIFACTS / "compiler-panel-dark.png"))
    assert errors == []
    context.close()


# Blocks in pairs: each stages its inputs in shared memory, and reads them back through
# the cluster's address space (mapa on its own rank), between two cluster barriers.
CLUSTER_KERNEL = r"""extern "C" __global__ void __cluster_dims__(2, 1, 1)
vector_add(const float* a, const float* b, float* out, int n)
{
    __shared__ float tile[256];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? a[i] : 0.0f;
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
    unsigned rank, remote, local = (unsigned)__cvta_generic_to_shared(&tile[threadIdx.x]);
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    float mine;
    asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(mine) : "r"(remote) : "memory");
    if (i < n) out[i] = mine + b[i];
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
"""


def test_cluster_badges_mark_their_instructions(server: str, browser: object) -> None:  # noqa: F811
    _nvcc_or_skip()
    context = browser.new_context(viewport={"width": 1366, "height": 1000})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/book/p1/first-gpu-kernel")
    page.wait_for_selector(f"{CELL} .cm-editor")
    page.click(f'{CELL} .kcell-tab[data-backend="cuda"]')
    shown = page.query_selector(f"{CELL} [data-run-card]")  # none for a new reader
    before = shown.get_attribute("data-run-id") if shown else None
    _type_kernel(page, CLUSTER_KERNEL)
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        """([sel, old]) => {
            const card = document.querySelector(sel + ' [data-run-card]');
            return card && card.dataset.final === 'true' && card.dataset.runId !== old;
        }""",
        arg=[CELL, before or ""],
        timeout=RUN_LIMIT_MS,
    )
    page.locator(f"{CELL} .run-details details > summary", has_text="Compiler").first.click()
    page.locator(f"{CELL} details[data-compiler-panel] > summary").click()
    page.wait_for_selector(f"{CELL} [data-compiler] .cbadge", timeout=20_000)
    view = page.locator(f"{CELL} [data-compiler]")
    hopper = view.locator(".cbadge-hopper")
    keys = [hopper.nth(i).get_attribute("data-feature") for i in range(hopper.count())]
    assert keys == ["cluster_barrier", "dsmem"], keys
    assert "No Hopper feature" not in view.inner_text()

    view.locator('.cbadge[data-feature="cluster_barrier"]').click()
    marked = view.locator('.asm-listing[data-listing="sass"] .asm-row.is-feature')
    assert marked.count() == 4
    assert all(t.split()[1].startswith("UCGABAR") for t in marked.all_inner_texts())
    # Each barrier instruction belongs to one of the four barrier lines of the source.
    lines = {marked.nth(i).get_attribute("data-line") for i in range(marked.count())}
    assert lines <= {"7", "8", "15", "16"} and len(lines) >= 2
    view.locator('.cbadge[data-feature="dsmem"]').click()
    assert view.locator('.cbadge[aria-pressed="true"]').count() == 1
    (prmt,) = view.locator(".asm-row.is-feature").all_inner_texts()
    assert "PRMT" in prmt and "0x654" in prmt
    view.screenshot(path=str(ARTIFACTS / "compiler-panel-cluster.png"))
    assert errors == []
    context.close()


TRITON_KERNEL = """import triton
import triton.language as tl


@triton.jit
def vector_add(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)
"""
LOAD_LINE = 9  # a = tl.load(...)


def test_a_triton_line_marks_its_rows_in_every_ir(server: str, browser: object) -> None:  # noqa: F811
    pytest.importorskip("triton")
    context = browser.new_context(viewport={"width": 1366, "height": 1000})  # type: ignore[attr-defined]
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(f"{server}/book/p1/first-gpu-kernel")
    page.wait_for_selector(f"{CELL} .cm-editor")
    page.click(f'{CELL} .kcell-tab[data-backend="triton"]')
    _type_kernel(page, TRITON_KERNEL)
    page.keyboard.press("Control+Enter")
    page.wait_for_selector(f'{CELL} [data-run-card][data-final="true"]', timeout=RUN_LIMIT_MS)
    page.locator(f"{CELL} .run-details details > summary", has_text="Compiler").first.click()
    page.locator(f"{CELL} details[data-compiler-panel] > summary").click()
    page.wait_for_selector(f"{CELL} [data-compiler] .src-row", timeout=20_000)
    view = page.locator(f"{CELL} [data-compiler]")
    tabs = view.locator(".compiler-tab")
    keys = [tabs.nth(i).get_attribute("data-listing") for i in range(tabs.count())]
    if keys == []:  # a GPU host runs Triton for real; here the interpreter ran it
        pytest.skip("no listings: " + view.inner_text()[:300])
    assert keys == ["ttir", "ttgir", "llir", "ptx", "sass"]
    view.locator(f'.src-row[data-line="{LOAD_LINE}"]').click()
    for key in keys[:-1]:  # SASS carries no line of its own in Triton's listing
        view.locator(f'.compiler-tab[data-listing="{key}"]').click()
        marked = view.locator(f'.asm-listing[data-listing="{key}"] .asm-row.is-pinned')
        assert marked.count() >= 1, key
        if key == "ttgir":
            assert "tt.load" in " ".join(marked.all_inner_texts())
            view.screenshot(path=str(ARTIFACTS / "compiler-panel-triton.png"))
    assert errors == []
    context.close()
