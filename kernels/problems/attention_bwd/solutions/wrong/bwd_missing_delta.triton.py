# WRONG: dS = P * dP, the D term left out. The softmax's Jacobian subtracts from each
# dP_ij the row's weighted mean sum_k P_ik dP_ik = rowsum(dO * O)_i; without it, dS keeps
# a share of dP that the normalisation removes, and dQ and dK are wrong wherever a row
# sees more than one key. dV does not involve dS and stays right.
# kplay: grid=(ceil_div(seq,BLOCK_N),batch*heads) BLOCK_M=32 BLOCK_N=64 HEAD_DIM=dim num_warps=4 num_stages=2
import os

import triton
import triton.language as tl

# Triton's interpreter (the CPU path of the checker) multiplies bfloat16 tiles in tl.dot as
# raw 16-bit integers. There, and only there, the operands are widened to float32 first:
# exact, so the arithmetic is the GPU's (bfloat16 products, float32 sums).
WIDEN = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))


@triton.jit
def _mma(a, b, acc):
    if WIDEN:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def attention_bwd(q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, dq_ptr, dk_ptr, dv_ptr,
                  scale, batch, heads, seq, dim, causal,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq * HEAD_DIM  # q, k, v, o, do, dq, dk and dv share the contiguous layout
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    keys = offs_n < seq
    kv_offs = head + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(k_ptr + kv_offs, mask=keys[:, None], other=0.0)  # [BLOCK_N, HEAD_DIM]
    v = tl.load(v_ptr + kv_offs, mask=keys[:, None], other=0.0)

    dk = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], dtype=tl.float32)
    log2e = 1.4426950408889634
    qk_scale = scale * log2e

    # Causal: query rows before start_n see none of these keys; start at their tile.
    lo = 0
    if causal:
        lo = (start_n // BLOCK_M) * BLOCK_M
    for start_m in range(lo, seq, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = offs_m < seq
        row_offs = head + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        q = tl.load(q_ptr + row_offs, mask=rows[:, None], other=0.0)
        do = tl.load(do_ptr + row_offs, mask=rows[:, None], other=0.0)
        o = tl.load(o_ptr + row_offs, mask=rows[:, None], other=0.0)
        lse = tl.load(lse_ptr + bh * seq + offs_m, mask=rows, other=0.0)
        delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), 1)  # D for these rows

        s = _mma(q, tl.trans(k), tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32))
        p = tl.math.exp2(s * qk_scale - lse[:, None] * log2e)
        keep = rows[:, None] & keys[None, :]
        if causal:
            keep = keep & (offs_n[None, :] <= offs_m[:, None])
        p = tl.where(keep, p, 0.0)

        dv = _mma(tl.trans(p.to(do.dtype)), do, dv)
        dp = _mma(do, tl.trans(v), tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32))
        ds = p * dp  # the D term is missing
        dk = _mma(tl.trans(ds.to(q.dtype)), q, dk)
        dq = _mma(ds.to(k.dtype), k, tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32))
        tl.atomic_add(dq_ptr + row_offs, dq * scale, mask=rows[:, None])

    tl.store(dk_ptr + kv_offs, dk * scale, mask=keys[:, None])
    tl.store(dv_ptr + kv_offs, dv, mask=keys[:, None])
