# Attention forward: o = softmax(scale * q @ k^T) @ v for every (batch, head), and
# lse = the natural-log log-sum-exp of each scaled score row. q, k, v, o are bfloat16
# [batch, heads, seq, dim], contiguous; lse is float32 [batch, heads, seq]. With causal,
# query i sees keys j <= i only.
# The default launch: grid (ceil_div(seq, BLOCK_M), batch*heads), BLOCK_M = 128,
# BLOCK_N = 64, HEAD_DIM = dim, 8 warps, 3 stages. Change it with a line such as
#   # kplay: BLOCK_N=128 num_stages=2
import triton
import triton.language as tl


@triton.jit
def attention_fwd(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, scale, batch, heads, seq, dim, causal,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq * HEAD_DIM  # offset of this (batch, head) in q, k, v and o
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    # TODO: 1. load this program's q tile [BLOCK_M, HEAD_DIM] (rows past seq as zeros);
    #       2. start m = -inf, l = 0 and acc = 0 (float32) for every row;
    #       3. for each key tile start_n: scores = tl.dot(q, k^T tile) * scale, masked to
    #          -inf where a key is past seq (or, with causal, after the query); take the
    #          new row maximum, the tile's exponentials against it, rescale l and acc by
    #          exp(old max - new max), add the tile's sum to l and tl.dot(p, v tile) to acc;
    #       4. store acc / l into o (as bfloat16) and m + log(l) into lse, rows < seq only.
