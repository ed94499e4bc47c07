# WRONG: the causal mask keeps keys j < i instead of j <= i: each query no longer sees
# itself. Row 0 is left with no key at all (l = 0, so o and lse are NaN), and every
# other row loses the weight of its own key. Non-causal cases still pass.
# kplay: grid=(ceil_div(seq,BLOCK_M),batch*heads) BLOCK_M=128 BLOCK_N=64 HEAD_DIM=dim num_warps=8 num_stages=3
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
def _key_tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n, seq, qk_scale,
              causal, MASKED: tl.constexpr, HEAD_DIM: tl.constexpr):
    cols = start_n + offs_n
    if MASKED:
        k = tl.load(k_ptrs + start_n * HEAD_DIM, mask=cols[None, :] < seq, other=0.0)
        v = tl.load(v_ptrs + start_n * HEAD_DIM, mask=cols[:, None] < seq, other=0.0)
    else:
        k = tl.load(k_ptrs + start_n * HEAD_DIM)
        v = tl.load(v_ptrs + start_n * HEAD_DIM)
    qk = _mma(q, k, tl.zeros([q.shape[0], k.shape[1]], dtype=tl.float32))  # [BLOCK_M, BLOCK_N]
    if MASKED:
        keep = (cols[None, :] < seq) & ((cols[None, :] < offs_m[:, None]) | (causal == 0))
        qk = tl.where(keep, qk, float("-inf"))
    # The new maximum first, then the exponentials taken against it, in base-2 units: the
    # scale is positive, so it commutes with the maximum, and qk * qk_scale - m is one FMA.
    m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_new[:, None])
    alpha = tl.math.exp2(m_i - m_new)  # 0 on the first tile (m_i = -inf)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = _mma(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, scale, batch, heads, seq, dim, causal,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    tl.static_assert(BLOCK_M % BLOCK_N == 0)
    # Query tiles in reverse: with causal, the last tiles see the most keys, and starting them
    # first leaves the short ones to fill the machine at the end of the launch.
    start_m = (tl.num_programs(0) - 1 - tl.program_id(0)) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq * HEAD_DIM  # q, k, v and o share the contiguous layout
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    q = tl.load(q_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
                mask=offs_m[:, None] < seq, other=0.0)
    k_ptrs = k_ptr + head + offs_n[None, :] * HEAD_DIM + offs_d[:, None]  # k^T tile
    v_ptrs = v_ptr + head + offs_n[:, None] * HEAD_DIM + offs_d[None, :]

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = scale * 1.4426950408889634  # log2(e)

    # Key tiles [0, full) need no mask: all keys exist, and (causal) all precede every
    # query of this tile. Tiles [full, end) are masked: the diagonal, or the last partial.
    if causal:
        full = start_m
        end = tl.minimum(start_m + BLOCK_M, seq)
    else:
        full = (seq // BLOCK_N) * BLOCK_N
        end = seq
    for start_n in range(0, full, BLOCK_N):
        acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n,
                                  seq, qk_scale, causal, False, HEAD_DIM)
    for start_n in range(full, end, BLOCK_N):
        acc, l_i, m_i = _key_tile(acc, l_i, m_i, q, k_ptrs, v_ptrs, start_n, offs_m, offs_n,
                                  seq, qk_scale, causal, True, HEAD_DIM)

    acc = acc / l_i[:, None]
    lse = m_i * 0.6931471805599453 + tl.log(l_i)  # back to natural log: m * ln(2) + ln(l)
    rows = offs_m < seq
    tl.store(lse_ptr + bh * seq + offs_m, lse, mask=rows)
    tl.store(o_ptr + head + offs_m[:, None] * HEAD_DIM + offs_d[None, :],
             acc.to(o_ptr.dtype.element_ty), mask=rows[:, None])
