# C = A @ B with A (M x K) and B (K x N) bfloat16, C (M x N) float32, row-major, in Triton.
# K and N are multiples of 8; M may be anything. Each program computes one
# BLOCK_M x BLOCK_N tile of C; change the tile or the launch with a line like the next one.
# kplay: grid=(ceil_div(M,BLOCK_M),ceil_div(N,BLOCK_N)) BLOCK_M=64 BLOCK_N=64 BLOCK_K=32 num_warps=4
import os

import triton
import triton.language as tl

# Triton's interpreter (where the checker runs without a GPU) multiplies bfloat16 tiles in
# tl.dot as raw 16-bit integers; there, and only there, widen the operands to float32 first.
WIDEN = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))


@triton.jit
def _mma(a, b, acc):
    if WIDEN:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def gemm_bf16(a_ptr, b_ptr, c_ptr, M, N, K,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        # TODO: load the BLOCK_M x BLOCK_K tile of A and the BLOCK_K x BLOCK_N tile of B at
        #       this step (mask what lies outside the matrices, fill it with 0) and add
        #       their product to acc with acc = _mma(a, b, acc).
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=inside)
