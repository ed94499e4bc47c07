# WRONG: the K loop stops at the last whole slice of BLOCK_K (range(0, K - BLOCK_K + 1,
# BLOCK_K)), so the K % BLOCK_K columns of A and rows of B past it are never multiplied,
# and a K below 64 multiplies nothing at all. Right only when K is a multiple of 64.
# kplay: grid=(ceil_div(M,BLOCK_M)*ceil_div(N,BLOCK_N)) BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=3
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
def gemm_bf16(a_ptr, b_ptr, c_ptr, M, N, K,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    # Grouped order: a group is GROUP_M tile rows (fewer in the last group), walked column
    # by column, so pid -> (row within the group, column).
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows

    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    b_ptrs = b_ptr + rk[:, None].to(tl.int64) * N + rn[None, :]
    in_m = rm[:, None] < M
    in_n = rn[None, :] < N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # Masked loads: what lies past M, N or K reads as zero and adds nothing.
    for k0 in range(0, K - BLOCK_K + 1, BLOCK_K):
        a = tl.load(a_ptrs, mask=in_m & (rk[None, :] < K - k0), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < K - k0) & in_n, other=0.0)
        acc = _mma(a, b, acc)
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    tl.store(c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=in_m & in_n)
