"""Inputs, float64 reference and PyTorch SDPA baseline for the attention forward pass."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.draws import Draws, array_module

# Column 0 of every query and every key holds SHIFT: each score of a row then carries the
# same SHIFT**2 * scale (90.5 at dim 128, 128 at dim 64), a constant the softmax removes.
# exp() of it overflows float32 (exp(88.7) is its largest value), so a kernel that does not
# subtract a running maximum fails, and lse is large enough for its relative error to show.
SHIFT = 32.0
# Spread of q and k: the rest of each score has a standard deviation of about 2.25, so the
# weights of a row span several orders of magnitude and the row maximum keeps growing
# from one key tile to the next (what the online softmax must rescale for).
SPREAD = 1.5


def generate(params: dict, draw: Draws) -> dict:
    b, h, s, d = (int(params[n]) for n in ("batch", "heads", "seq", "dim"))
    shape = (b, h, s, d)
    bf16 = dtypes.get("bfloat16").storage
    q = draw.normal(shape, 0.0, SPREAD)
    k = draw.normal(shape, 0.0, SPREAD)
    q[..., 0] = SHIFT
    k[..., 0] = SHIFT
    # Each column of v keeps one sign (negative in every third column), magnitudes in
    # [0.25, 2]: an output element is then a weighted mean of values of one sign, with no
    # cancellation, so a tight bfloat16 tolerance holds for a kernel that accumulates in
    # float32 and fails one that accumulates in 16 bits. The signs depend on the column
    # only, not on the seed: the timed repetitions patch inputs with another seed's values.
    xp = draw.xp
    signs = xp.where(xp.arange(d) % 3 == 0, -1.0, 1.0).astype(xp.float32)
    v = draw.uniform(shape, 0.25, 2.0) * signs
    return {
        "q": q.astype(bf16),
        "k": k.astype(bf16),
        "v": v.astype(bf16),
        "scale": 1.0 / math.sqrt(d),
    }


# From this many scores (batch * heads * seq * seq) on, the float64 reference is computed
# on the GPU where there is one: bfloat16 cases are drawn and compared on the host (CuPy has
# no bfloat16), and the benchmark case's 550 GFLOP and 10^9 exponentials in float64 are a
# long wait on a host's cores next to the device's. Same code, same float64 numbers.
DEVICE_MIN_SCORES = 1 << 24


def _gpu_module() -> Any:
    """CuPy when it sees a GPU, else None."""
    try:
        import cupy

        return cupy if cupy.cuda.runtime.getDeviceCount() > 0 else None
    except Exception:  # noqa: BLE001 - no CuPy, no driver, no device: compute on the host
        return None


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["q"])
    b, h, s = (int(params[n]) for n in ("batch", "heads", "seq"))
    scale = float(np.float32(inputs["scale"]))
    gpu = _gpu_module() if xp is np and b * h * s * s >= DEVICE_MIN_SCORES else None
    if gpu is None:
        return attention(inputs["q"], inputs["k"], inputs["v"], scale, params["causal"], xp)
    # bfloat16 -> float32 is exact; the device widens to float64 one head at a time.
    q, k, v = (gpu.asarray(inputs[n].astype(np.float32)) for n in "qkv")
    out = attention(q, k, v, scale, params["causal"], gpu)
    return {name: array.get() for name, array in out.items()}


def attention(q: Any, k: Any, v: Any, scale: float, causal: bool, xp: Any) -> dict:
    """o and lse in float64, one (batch, head) at a time: the benchmark case's whole score
    tensor would take 8 GiB."""
    b, h, s, d = q.shape
    o = xp.empty((b, h, s, d), dtype=xp.float64)
    lse = xp.empty((b, h, s), dtype=xp.float64)
    above = xp.triu(xp.ones((s, s), dtype=bool), 1) if causal else None
    for i in range(b):
        for j in range(h):
            p = q[i, j].astype(xp.float64) @ k[i, j].astype(xp.float64).T
            p *= scale  # the scores, then the weights, in place: one seq x seq buffer
            if above is not None:
                p[above] = -xp.inf
            m = p.max(axis=1, keepdims=True)
            p -= m
            xp.exp(p, out=p)
            total = p.sum(axis=1, keepdims=True)
            o[i, j] = (p @ v[i, j].astype(xp.float64)) / total
            lse[i, j] = (m + xp.log(total))[:, 0]
    return {"o": o, "lse": lse}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    """torch.nn.functional.scaled_dot_product_attention on its FlashAttention backend.

    The arrays hold bfloat16 bits (CuPy has no bfloat16); torch views them as bfloat16
    without a copy. SDPA returns a new tensor, copied into o: 2*B*H*S*D bytes read and
    written, by the computed bound of the calibrated copy roof about 2% of the flash
    backend's time at the benchmark's size. lse is left unwritten.
    """
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    device = "cuda" if xp.__name__ == "cupy" else "cpu"  # NumPy arrays: a test on the host

    def view(name: str) -> Any:
        return torch.as_tensor(arrays[name].view(xp.int16), device=device).view(torch.bfloat16)

    q, k, v, o = (view(n) for n in ("q", "k", "v", "o"))
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=bool(params["causal"]), scale=float(arrays["scale"])
        )
    o.copy_(out)
