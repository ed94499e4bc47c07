"""The attention_bwd problem: its generated forward (o, lse) and its float64 gradients against
PyTorch's autograd, and the autograd baseline run on the host. The Triton files themselves
are run by test_solutions.py."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kplay.kernels.catalog import load_problem
from kplay.kernels.draws import Draws

FOLDER = Path(__file__).resolve().parents[2] / "kernels" / "problems" / "attention_bwd"
SPEC = load_problem(FOLDER)
REF = SPEC.reference
PARAMS = {"batch": 1, "heads": 2, "seq": 40, "dim": 64}


def _autograd(inputs: dict, causal: bool) -> dict:
    """Float64 forward and backward through plain torch ops, from the rounded q, k, v, do."""
    torch = pytest.importorskip("torch")
    q, k, v = (
        torch.tensor(inputs[n].astype(np.float64), requires_grad=True) for n in ("q", "k", "v")
    )
    s = (q @ k.transpose(-1, -2)) * float(np.float32(inputs["scale"]))
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    o = torch.softmax(s, dim=-1) @ v
    o.backward(torch.tensor(inputs["do"].astype(np.float64)))
    grads = {"dq": q.grad, "dk": k.grad, "dv": v.grad}
    return {"o": o.detach(), "lse": lse.detach(), **{n: g.numpy() for n, g in grads.items()}}


@pytest.mark.parametrize("causal", [False, True])
def test_the_inputs_hold_the_rounded_exact_forward(causal: bool) -> None:
    params = {**PARAMS, "causal": causal}
    inputs = REF.generate(params, Draws(5))
    exact = _autograd(inputs, causal)
    o = inputs["o"].astype(np.float64)
    # o is rounded to bfloat16 (half a unit, 2^-9 relative), lse to float32.
    assert np.all(np.abs(o - exact["o"].numpy()) <= 2.0**-8 * np.abs(exact["o"].numpy()))
    assert np.allclose(inputs["lse"], exact["lse"].numpy(), rtol=1e-6, atol=0)
    # the SHIFT column makes every lse large: exp() of a raw score overflows float32
    assert inputs["lse"].min() > 88.8


@pytest.mark.parametrize("causal", [False, True])
def test_reference_matches_autograd(causal: bool) -> None:
    """Given the exact o and lse, the reference is autograd's gradient. (With the rounded
    o of the inputs, dq's column 0 moves by up to 10% of dq's largest value: k's column 0
    is 32 and carries the rounding of D = rowsum(dO * O). A kernel sees the rounded o, so
    the problem's reference uses it too.)"""
    params = {**PARAMS, "causal": causal}
    inputs = REF.generate(params, Draws(6))
    exact = _autograd(inputs, causal)
    given = {**inputs, "o": exact["o"].numpy(), "lse": exact["lse"].numpy()}
    out = REF.reference(given, params)
    for name in ("dq", "dk", "dv"):
        # o passes through float32 in the reference: 1e-7 relative
        err = np.abs(out[name] - exact[name]).max()
        assert err <= 1e-5 * np.abs(exact[name]).max(), (name, err)


@pytest.mark.parametrize("causal", [False, True])
def test_the_autograd_baseline_writes_the_gradients(causal: bool) -> None:
    """On the host, through the same views of the bfloat16 bits that CuPy arrays get. The
    library returns bfloat16 gradients from its own forward: close, not within the
    problem's tolerance, so compared in norm
    (5%: dq's column 0 carries the library's own rounding of o, see above)."""
    pytest.importorskip("torch")
    params = {**PARAMS, "seq": 65, "causal": causal}
    inputs = REF.generate(params, Draws(7))
    arrays = {n: inputs[n].view(np.uint16).copy() for n in ("q", "k", "v", "o", "do")}
    arrays["lse"] = inputs["lse"]
    arrays["scale"] = np.float32(inputs["scale"])
    for name in ("dq", "dk", "dv"):
        arrays[name] = np.full(inputs["q"].shape, np.nan, dtype=np.float32)
    REF.baseline(arrays, params, np)
    expected = REF.reference(inputs, params)
    for name in ("dq", "dk", "dv"):
        err = np.linalg.norm(arrays[name] - expected[name]) / np.linalg.norm(expected[name])
        assert err < 0.05, (name, err)
