"""The Hopper-feature badges, on listings read by hand and on fresh nvcc builds.

tests/kernels/data/sass holds eight small kernels (.cu), and the PTX and SASS the engine's
own nvcc report made of them for sm_90a (nvdisasm -c -gi). Each listing was read
instruction by instruction; EXPECTED is what it holds. The same sources are compiled
again where nvcc is installed, so a new toolkit that changes the instructions shows up.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels.sassfeatures import (
    BY_KEY,
    instructions,
    lost_features,
    opcode_counts,
    ptx_requests,
    ptxas_advice,
    sass_features,
)

DATA = Path(__file__).parent / "data" / "sass"

# kernel file -> (its entry, {feature: {opcode: count}}) as read in the listing by hand.
EXPECTED: dict[str, tuple[str, dict[str, dict[str, int]]]] = {
    "wgmma": ("wgmma_tile", {"wgmma": {"HGMMA": 1}}),
    "tma": (
        "tma_copy",
        {
            "tma_load": {"UTMALDG": 1},
            "tma_store": {"UTMASTG": 1},
            "tma_prefetch": {"UTMAPF": 1},
            "mbarrier": {"SYNCS": 4},
        },
    ),
    "cluster": (
        "cluster_swap",
        {"cluster_barrier": {"UCGABAR_ARV": 2, "UCGABAR_WAIT": 2}, "dsmem": {"PRMT": 1}},
    ),
    "setmaxnreg": ("split_roles", {"setmaxnreg": {"USETMAXREG": 2}}),
    "setmaxnreg_ignored": ("split_roles", {}),
    "wmma": ("wmma_tile", {"mma_sync": {"HMMA": 2}}),
    "async_copy": (
        "staged_sum",
        {"bulk_copy": {"UBLKCP": 1}, "mbarrier": {"SYNCS": 4}, "cp_async": {"LDGSTS": 1}},
    ),
    "plain": ("vector_add", {}),
}


def _found(sass: str) -> dict[str, dict[str, int]]:
    return {u.feature.key: dict(u.opcodes) for u in sass_features(sass)}


@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_the_badges_match_the_listing_read_by_hand(stem: str) -> None:
    entry, expected = EXPECTED[stem]
    sass = (DATA / f"{stem}.sass").read_text()
    assert _found(sass) == expected
    for use in sass_features(sass):
        assert use.functions == [entry]
        lines = sass.splitlines()
        assert all(lines[r].lstrip().startswith("/*") for r in use.rows)


def test_setmaxnreg_that_ptxas_dropped_is_reported_as_lost() -> None:
    ptx = (DATA / "setmaxnreg_ignored.ptx").read_text()
    sass = (DATA / "setmaxnreg_ignored.sass").read_text()
    assert [f.key for f in ptx_requests(ptx)] == ["setmaxnreg"]
    assert [f.key for f in lost_features(ptx, sass, "sm_90a")] == ["setmaxnreg"]


@pytest.mark.parametrize("stem", sorted(set(EXPECTED) - {"setmaxnreg_ignored"}))
def test_what_the_ptx_asks_for_reaches_the_sass(stem: str) -> None:
    ptx = (DATA / f"{stem}.ptx").read_text()
    sass = (DATA / f"{stem}.sass").read_text()
    asked = {f.key for f in ptx_requests(ptx)}
    assert asked <= set(EXPECTED[stem][1])
    assert lost_features(ptx, sass, "sm_90a") == []


def test_before_hopper_only_the_older_features_can_be_lost() -> None:
    ptx = "mbarrier.try_wait.parity.shared::cta.b64 p, [r1], 0;\nmma.sync.aligned.m16n8k16;\n"
    sass = "        /*0000*/                   ATOMS.ADD R0, [R1], R2 ;\n"
    assert [f.key for f in lost_features(ptx, sass, "sm_80")] == ["mma_sync"]
    assert [f.key for f in lost_features(ptx, sass, "sm_90a")] == ["mbarrier", "mma_sync"]


def test_a_name_in_a_ptx_comment_asks_for_nothing() -> None:
    assert ptx_requests("// wgmma.mma_async would go here\n\tret;\n") == []


def test_the_three_listing_formats_are_read() -> None:
    nvdisasm = "        /*0380*/                   HGMMA.64x8x16.F32 R24, gdesc[UR4], RZ ;\n"
    cuobjdump = (
        "\t\tFunction : k\n"
        "        /*0070*/              @!P0 HMMA.16816.F32 R16, R4, R12, RZ ;"
        "  /* 0x000000000c10723c */\n"
    )
    triton = "Function:add\n--:-:-:Y:2\t@!P0 LDGSTS.E [R3], desc[UR4][R4.64];\n"
    assert [(i.opcode, i.function) for i in instructions(nvdisasm)] == [("HGMMA.64x8x16.F32", "")]
    assert [(i.base, i.function) for i in instructions(cuobjdump)] == [("HMMA", "k")]
    assert [(i.base, i.function, i.row) for i in instructions(triton)] == [("LDGSTS", "add", 1)]


def test_look_alikes_are_not_features() -> None:
    sass = "\n".join(
        f"        /*{i:04x}*/                   {text} ;"
        for i, text in enumerate(
            [
                "HFMA2.MMA R5, -RZ, RZ, 2.125, 0",  # a half add on the MMA pipe, not an MMA
                "PRMT R5, R4, 0x7610, R5",  # a byte permute, not a mapa
                "LDS R5, [R0]",
                "BAR.SYNC.DEFER_BLOCKING 0x0",
            ]
        )
    )
    assert sass_features(sass) == []
    assert opcode_counts(sass) == {"HFMA2": 1, "PRMT": 1, "LDS": 1, "BAR": 1}


def test_spills_show_as_local_memory() -> None:
    sass = (
        "        /*0000*/                   STL [R1+0x4], R2 ;\n"
        "        /*0010*/                   LDL R3, [R1+0x4] ;\n"
    )
    (use,) = sass_features(sass)
    assert use.feature is BY_KEY["local_memory"] and use.count == 2 and use.rows == [0, 1]
    assert use.evidence == "STL ×1, LDL ×1"


def test_ptxas_remarks_are_collected_once() -> None:
    log = (DATA / "setmaxnreg_ignored.cu").read_text()  # no remark in a source
    assert ptxas_advice(log) == []
    line = (
        "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; "
        "unable to determine register count at entry."
    )
    code, text = ptxas_advice(f"{line}\n{line}\nptxas info    : Used 22 registers")[0]
    assert code == "C7508" and text.startswith("Potential Performance Loss: 'setmaxnreg'")
    assert len(ptxas_advice(f"{line}\n{line}")) == 1


# ---------------------------------------------------------------- fresh builds


def _nvcc_or_skip() -> Path:
    from kplay.kernels.backends.toolkit_find import find_tool

    nvcc = find_tool("nvcc")
    if nvcc is None or find_tool("nvdisasm", near=nvcc) is None:
        pytest.skip("needs nvcc and nvdisasm (pip install nvidia-cuda-nvcc nvidia-cuda-nvdisasm)")
    return nvcc


@pytest.mark.slow
@pytest.mark.parametrize("stem", sorted(EXPECTED))
def test_a_fresh_sm90a_build_has_the_same_badges(stem: str, tmp_path: Path) -> None:
    from kplay.kernels.backends.cuda_source import kernel_name_problem
    from kplay.kernels.backends.toolkit_run import finish_nvcc, start_nvcc

    nvcc = _nvcc_or_skip()
    entry, expected = EXPECTED[stem]
    source = (DATA / f"{stem}.cu").read_text()
    # As the CUDA backend does: a host reference makes nvcc emit the kernel.
    full = f"{source}\nvoid* kplay_kernel_reference_ = (void*)&{entry};\n"
    running = start_nvcc(nvcc, full, "sm_90a", tmp_path, 120)
    stage = finish_nvcc(running, tmp_path, source, entry, kernel_name_problem(entry))
    assert stage.ok, stage.log
    assert stage.sass is not None and stage.ptx is not None
    assert _found(stage.sass) == expected
    lost = [f.key for f in lost_features(stage.ptx, stage.sass, "sm_90a")]
    assert lost == (["setmaxnreg"] if stem == "setmaxnreg_ignored" else [])
    if stem == "setmaxnreg_ignored":
        assert [code for code, _ in ptxas_advice(stage.log)] == ["C7508"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_listing_cut_at_its_limit_keeps_the_whole_listings_badges(name: str) -> None:
    from kplay.kernels.backends.toolkit_parse import truncate
    from kplay.kernels.sassfeatures import noted_features

    sass = (DATA / f"{name}.sass").read_text()
    whole = {u.feature.key: dict(u.opcodes) for u in sass_features(sass)}
    cut = truncate(sass, 600, "SASS")  # the first few instructions only
    assert "[SASS truncated:" in cut
    noted = noted_features(cut)
    assert noted is not None
    assert {u.feature.key: dict(u.opcodes) for u in noted} == whole
    assert noted_features(sass) is None  # a whole listing has no note
