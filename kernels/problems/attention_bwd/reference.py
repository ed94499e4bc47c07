"""Inputs, float64 reference and PyTorch autograd baseline for the attention backward pass."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.draws import Draws, array_module

# q, k and v are drawn as the forward problem draws them. Column 0 of every query and key
# holds SHIFT, so every score of a row carries the same SHIFT**2 * scale (90 to 128) and
# exp() of a raw score overflows float32: P must be recomputed as exp(s - lse), not exp(s).
SHIFT = 32.0
# The rest of each score spreads by about 2.25: the weights of a row span several orders
# of magnitude, as in a trained model's attention.
SPREAD = 1.5
# The incoming gradient dO: a standard normal, both signs, so dS = P * (dP - D) has terms
# of both signs and D = rowsum(dO * O) is far from zero (a kernel that drops it fails).
DO_STD = 1.0
# From this many scores (batch * heads * seq * seq) on, the float64 forward of generate()
# and the float64 reference run on the GPU where there is one, one head at a time (the
# benchmark case's 8 float64 matmuls per head are a long wait on host cores).
DEVICE_MIN_SCORES = 1 << 24


def _gpu_module() -> Any:
    """CuPy when it sees a GPU, else None."""
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: compute on the host
        return None


def _where(params: dict, xp: Any) -> Any:
    """The array module the float64 work runs in: the GPU's for a large case, else xp."""
    b, h, s = (int(params[n]) for n in ("batch", "heads", "seq"))
    if xp is np and b * h * s * s >= DEVICE_MIN_SCORES:
        return _gpu_module() or np
    return xp


def _host(array: Any) -> Any:
    return array.get() if hasattr(array, "get") else array


def generate(params: dict, draw: Draws) -> dict:
    b, h, s, d = (int(params[n]) for n in ("batch", "heads", "seq", "dim"))
    shape = (b, h, s, d)
    bf16 = dtypes.get("bfloat16").storage
    xp = draw.xp
    q = draw.normal(shape, 0.0, SPREAD)
    k = draw.normal(shape, 0.0, SPREAD)
    q[..., 0] = SHIFT
    k[..., 0] = SHIFT
    signs = xp.where(xp.arange(d) % 3 == 0, -1.0, 1.0).astype(xp.float32)
    v = draw.uniform(shape, 0.25, 2.0) * signs
    do = draw.normal(shape, 0.0, DO_STD)
    q, k, v, do = (a.astype(bf16) for a in (q, k, v, do))
    scale = 1.0 / math.sqrt(d)
    # The exact forward from the rounded q, k, v: o rounded to bfloat16 and lse to float32,
    # as a correct forward kernel hands them to the backward.
    gpu = _where(params, xp)
    wide = [gpu.asarray(a.astype(np.float32)) for a in (q, k, v)]
    o, lse = _forward(*wide, float(np.float32(scale)), bool(params["causal"]), gpu)
    return {
        "q": q,
        "k": k,
        "v": v,
        "o": _host(o).astype(bf16),
        "do": do,
        "lse": _host(lse).astype(np.float32),
        "scale": scale,
    }


def _scores(q: Any, k: Any, scale: float, causal: bool, xp: Any) -> Any:
    """scale * q @ k^T of one head in float64, -inf above the diagonal when causal."""
    s = (q.astype(xp.float64) @ k.astype(xp.float64).T) * scale
    if causal:
        n = s.shape[0]
        s[xp.triu(xp.ones((n, n), dtype=bool), 1)] = -xp.inf
    return s


def _forward(q: Any, k: Any, v: Any, scale: float, causal: bool, xp: Any) -> tuple:
    b, h, n, d = q.shape
    o = xp.empty((b, h, n, d), dtype=xp.float64)
    lse = xp.empty((b, h, n), dtype=xp.float64)
    for i in range(b):
        for j in range(h):
            s = _scores(q[i, j], k[i, j], scale, causal, xp)
            m = s.max(axis=1, keepdims=True)
            p = xp.exp(s - m)
            total = p.sum(axis=1, keepdims=True)
            o[i, j] = (p @ v[i, j].astype(xp.float64)) / total
            lse[i, j] = (m + xp.log(total))[:, 0]
    return o, lse


def reference(inputs: dict, params: dict) -> dict:
    """dq, dk, dv in float64 from the inputs as given (o in bfloat16, lse in float32)."""
    xp = _where(params, array_module(inputs["q"]))
    q, k, v, o, do = (
        xp.asarray(inputs[n].astype(np.float32)).astype(xp.float64)
        for n in ("q", "k", "v", "o", "do")
    )
    lse = xp.asarray(inputs["lse"]).astype(xp.float64)
    scale = float(np.float32(inputs["scale"]))
    causal = bool(params["causal"])
    dq, dk, dv = (xp.empty_like(q) for _ in range(3))
    b, h = q.shape[:2]
    for i in range(b):
        for j in range(h):
            p = xp.exp(_scores(q[i, j], k[i, j], scale, causal, xp) - lse[i, j][:, None])
            dv[i, j] = p.T @ do[i, j]
            dp = do[i, j] @ v[i, j].T
            delta = (do[i, j] * o[i, j]).sum(axis=1)
            ds = p * (dp - delta[:, None])
            dq[i, j] = scale * (ds @ k[i, j])
            dk[i, j] = scale * (ds.T @ q[i, j])
    return {"dq": _host(dq), "dk": _host(dk), "dv": _host(dv)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    """PyTorch autograd through scaled_dot_product_attention on its FlashAttention backend.

    Autograd has no entry for the backward alone: the timed call runs SDPA's forward too
    (about 2/7 of the FLOPs of forward plus backward), so the baseline is slower than the
    library's backward by itself. The gradients come back in bfloat16 and are copied into
    the float32 outputs.
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = "cuda" if xp.__name__ == "cupy" else "cpu"  # NumPy arrays: a test on the host

    def view(name: str) -> Any:
        return torch.as_tensor(arrays[name].view(xp.int16), device=device).view(torch.bfloat16)

    q, k, v = (view(n).detach().requires_grad_(True) for n in ("q", "k", "v"))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=bool(params["causal"]), scale=float(arrays["scale"])
        )
        out.backward(view("do"))
    for name, grad in (("dq", q.grad), ("dk", k.grad), ("dv", v.grad)):
        torch.as_tensor(arrays[name], device=device).copy_(grad)
