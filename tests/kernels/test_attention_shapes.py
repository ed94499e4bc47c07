"""Problems of the shapes attention needs: several inputs and outputs (q, k, v -> o, lse),
a float scalar (scale) and a bool case parameter (causal), and a paged KV cache read
through an int32 block table. Written as problem folders and checked by the harness with
NumPy kernels standing in for the learner's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.catalog import ProblemLoadError, load_problem
from tests.kernels.problem_kit import STARTER, check_with

COMMON = """\
title = "A test problem"
summary = "Written by a test."
backends = ["numba-cpu"]
flops = "1"
bytes = "1"
hints = ["one"]

[launch."numba-cpu"]
kernel = "kernel"

[[tiers]]
name = "bronze"
percent_of_roofline = 10

[tolerance.float32]
atol = 1e-5
rtol = 1e-4
"""


def _arg(name: str, dtype: str, role: str, shape: str = "") -> str:
    text = f'[[args]]\nname = "{name}"\ndtype = "{dtype}"\nrole = "{role}"\n'
    return text + (f"shape = {shape}\n" if shape else "") + "\n"


def _write(root: Path, slug: str, params: str, args: str, case: str, reference: str) -> Path:
    folder = root / slug
    (folder / "starter").mkdir(parents=True)
    (folder / "starter" / "kernel.numba_cpu.py").write_text(STARTER)
    toml = f'slug = "{slug}"\nparams = {params}\n{COMMON}\n{args}'
    toml += f'[[tests]]\nname = "small"\nparams = {case}\nseed = 5\n\n'
    toml += f'[[benchmarks]]\nname = "small"\nparams = {case}\nmeasures = "L1, a test"\n'
    (folder / "problem.toml").write_text(toml)
    (folder / "reference.py").write_text(textwrap.dedent(reference))
    return folder


QKV = '["batch", "heads", "seq", "dim"]'
ATTENTION_ARGS = (
    _arg("q", "float32", "in", QKV)
    + _arg("k", "float32", "in", QKV)
    + _arg("v", "float32", "in", QKV)
    + _arg("o", "float32", "out", QKV)
    + _arg("lse", "float32", "out", '["batch", "heads", "seq"]')
    + _arg("scale", "float32", "scalar")
    + _arg("causal", "bool", "param")
    + "".join(_arg(p, "int32", "param") for p in ("batch", "heads", "seq", "dim"))
)
ATTENTION_REFERENCE = """\
import numpy as np


def generate(params, draw):
    shape = (params["batch"], params["heads"], params["seq"], params["dim"])
    q, k, v = (draw.normal(shape) for _ in range(3))
    return {"q": q, "k": k, "v": v, "scale": 1.0 / np.sqrt(params["dim"])}


def reference(inputs, params):
    q, k, v = (inputs[n].astype(np.float64) for n in "qkv")
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * np.float32(inputs["scale"])
    if params["causal"]:
        seq = s.shape[-1]
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    return {"o": (p / total) @ v, "lse": (m + np.log(total))[..., 0]}
"""


def _attention(tmp_path: Path, causal: bool = True, reference: str = ATTENTION_REFERENCE):
    params = '["batch", "heads", "seq", "dim", "causal"]'
    case = f"{{ batch = 2, heads = 3, seq = 7, dim = 8, causal = {str(causal).lower()} }}"
    return _write(tmp_path, "attention", params, ATTENTION_ARGS, case, reference)


def numpy_attention(q, k, v, o, lse, scale, causal, batch, heads, seq, dim, mask=True):  # type: ignore[no-untyped-def]
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    if causal and mask:
        s = np.where(np.tril(np.ones((seq, seq), bool)), s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    p = np.exp(s - m)
    total = p.sum(axis=-1, keepdims=True)
    o[...] = (p / total) @ v
    lse[...] = (m + np.log(total))[..., 0]


@pytest.mark.parametrize("causal", [True, False])
def test_attention_with_two_outputs_a_scale_and_a_causal_flag(tmp_path: Path, causal: bool):
    problem = load_problem(_attention(tmp_path, causal))
    assert [a.name for a in problem.outputs] == ["o", "lse"]
    seen = {}

    def kernel(*args):  # type: ignore[no-untyped-def]
        seen["scale"], seen["causal"] = args[5], args[6]
        numpy_attention(*args)

    check, _ = check_with(problem, kernel)
    assert check.ok, check.message
    assert isinstance(seen["causal"], np.bool_) and bool(seen["causal"]) is causal
    assert isinstance(seen["scale"], np.float32)

    def unmasked(*args):  # type: ignore[no-untyped-def]
        numpy_attention(*args, mask=False)

    assert check_with(problem, unmasked)[0].ok is not causal


def test_attention_output_left_unwritten_is_named(tmp_path: Path):
    problem = load_problem(_attention(tmp_path))

    def no_lse(q, k, v, o, lse, *rest):  # type: ignore[no-untyped-def]
        numpy_attention(q, k, v, o, np.empty_like(lse), *rest)

    check, _ = check_with(problem, no_lse)
    assert not check.ok and check.output == "lse" and "Never written" in check.message


def test_an_attention_reference_without_lse_is_refused(tmp_path: Path):
    broken = ATTENTION_REFERENCE.replace(', "lse": (m + np.log(total))[..., 0]', "")
    with pytest.raises(ProblemLoadError, match="did not return 'lse'"):
        load_problem(_attention(tmp_path, reference=broken))


PAGED_ARGS = (
    _arg("q", "float32", "in", '["batch", "heads", "dim"]')
    + _arg("k_cache", "float32", "in", '["num_blocks", "block_size", "heads", "dim"]')
    + _arg("v_cache", "float32", "in", '["num_blocks", "block_size", "heads", "dim"]')
    + _arg("block_table", "int32", "in", '["batch", "max_blocks"]')
    + _arg("seq_lens", "int32", "in", '["batch"]')
    + _arg("o", "float32", "out", '["batch", "heads", "dim"]')
    + _arg("scale", "float32", "scalar")
    + "".join(
        _arg(p, "int32", "param")
        for p in ("batch", "heads", "dim", "block_size", "num_blocks", "max_blocks")
    )
)
PAGED_REFERENCE = """\
import numpy as np


def generate(params, draw):
    b, h, d = params["batch"], params["heads"], params["dim"]
    size, blocks, most = params["block_size"], params["num_blocks"], params["max_blocks"]
    xp = draw.xp
    # Each sequence gets its own blocks of the cache, in a shuffled order.
    order = xp.argsort(draw.uniform(blocks, 0.0, 1.0))[: b * most]
    return {
        "q": draw.normal((b, h, d)),
        "k_cache": draw.normal((blocks, size, h, d)),
        "v_cache": draw.normal((blocks, size, h, d)),
        "block_table": order.reshape(b, most).astype(xp.int32),
        "seq_lens": draw.integers(b, 1, most * size, "int32"),
        "scale": 1.0 / np.sqrt(d),
    }


def _keys(cache, table, length, size):
    rows = [cache[table[j // size], j % size] for j in range(length)]
    return np.stack(rows).astype(np.float64)  # (length, heads, dim)


def reference(inputs, params):
    size = params["block_size"]
    out = []
    for i, length in enumerate(inputs["seq_lens"]):
        table = inputs["block_table"][i]
        k = _keys(inputs["k_cache"], table, int(length), size)
        v = _keys(inputs["v_cache"], table, int(length), size)
        s = np.einsum("hd,lhd->hl", inputs["q"][i].astype(np.float64), k)
        s *= np.float32(inputs["scale"])
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out.append(np.einsum("hl,lhd->hd", p / p.sum(axis=1, keepdims=True), v))
    return {"o": np.stack(out)}
"""


def test_a_paged_kv_cache_is_read_through_its_block_table(tmp_path: Path):
    params = '["batch", "heads", "dim", "block_size", "num_blocks", "max_blocks"]'
    case = "{ batch = 3, heads = 2, dim = 4, block_size = 4, num_blocks = 16, max_blocks = 5 }"
    problem = load_problem(_write(tmp_path, "paged", params, PAGED_ARGS, case, PAGED_REFERENCE))

    def paged(q, k_cache, v_cache, table, lens, o, scale, *_params, follow=True):  # type: ignore[no-untyped-def]
        assert table.dtype == np.int32 and lens.dtype == np.int32
        size = k_cache.shape[1]
        for i in range(q.shape[0]):
            js = np.arange(int(lens[i]))
            blocks = table[i, js // size] if follow else js // size
            k, v = k_cache[blocks, js % size], v_cache[blocks, js % size]
            s = np.einsum("hd,lhd->hl", q[i], k) * scale
            p = np.exp(s - s.max(axis=1, keepdims=True))
            o[i] = np.einsum("hl,lhd->hd", p / p.sum(axis=1, keepdims=True), v)

    check, _ = check_with(problem, paged)
    assert check.ok, check.message

    def contiguous(*args):  # type: ignore[no-untyped-def]
        paged(*args, follow=False)  # reads the cache as if it were not paged

    assert not check_with(problem, contiguous)[0].ok
