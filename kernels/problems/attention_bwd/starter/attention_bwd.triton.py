# Attention backward: given q, k, v, the forward's output o and row log-sum-exp lse, and do
# (the gradient of the loss with respect to o), write dq, dk and dv. q, k, v, o, do are
# bfloat16 [batch, heads, seq, dim], contiguous; lse is float32 [batch, heads, seq], natural
# log; dq, dk, dv are float32 with the same layout, and dq starts at zero. With causal,
# query i sees keys j <= i only.
#
# Per (batch, head), with P the attention weights:
#   P  = exp(scale * Q K^T - lse)    lse broadcast along each row; no running maximum needed
#   dV = P^T dO
#   dP = dO V^T
#   dS = P * (dP - D)                elementwise, with D = rowsum(dO * O): one number a row
#   dQ = scale * dS K
#   dK = scale * dS^T Q
# D stands in for rowsum(P * dP), the softmax Jacobian's row sum, which is the same number.
#
# The default launch: grid (ceil_div(seq, BLOCK_N), batch*heads), BLOCK_M = 32,
# BLOCK_N = 64, HEAD_DIM = dim, 4 warps, 2 stages: one program per tile of BLOCK_N keys.
# Change it with a line such as
#   # kplay: BLOCK_M=64 num_stages=3
import triton
import triton.language as tl


@triton.jit
def attention_bwd(q_ptr, k_ptr, v_ptr, o_ptr, do_ptr, lse_ptr, dq_ptr, dk_ptr, dv_ptr,
                  scale, batch, heads, seq, dim, causal,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr):
    start_n = tl.program_id(0) * BLOCK_N
    bh = tl.program_id(1).to(tl.int64)
    head = bh * seq * HEAD_DIM  # offset of this (batch, head) in q, k, v, o, do and the grads
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)

    # TODO: 1. load this program's k and v tiles [BLOCK_N, HEAD_DIM] (keys past seq as zeros)
    #          and start float32 accumulators dk and dv at zero;
    #       2. for each query tile start_m (with causal, from the tile holding row start_n):
    #          load q, o, do [BLOCK_M, HEAD_DIM] and lse [BLOCK_M]; D = sum(do * o, axis 1)
    #          in float32; p = exp(scale * q @ k^T - lse), zero past seq and above the
    #          diagonal; dv += p^T @ do; dp = do @ v^T; ds = p * (dp - D); dk += ds^T @ q;
    #          add scale * (ds @ k) into dq's rows with tl.atomic_add (other key tiles add
    #          to the same rows);
    #       3. store scale * dk and dv, keys < seq only.
