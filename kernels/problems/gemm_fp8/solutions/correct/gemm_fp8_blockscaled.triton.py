# Block-scaled FP8 GEMM in Triton: C = (A_q * a_scale) @ (B_q * b_scale)^T in bf16, A_q
# (M x K) and B_q (N x K) float8_e4m3fn, K-major both ("TN", what Hopper's FP8 wgmma reads).
# One program per 128x128 tile of C, grouped GROUP_M tile rows at a time for L2 reuse.
#
# The K step is one scale block (128): each step's tl.dot starts from zero and returns the
# block's partial product in fp32, which is multiplied by a_scale[m, kb] * b_scale[nb, kb]
# (a scale per row of A, one for the whole 128-column tile of B) and added to the
# accumulator. This is also the "promotion" that FP8 needs on Hopper: the tensor cores sum
# fp8 products with fewer bits than fp32 (Triton lets them, max_num_imprecise_acc), so
# no sum longer than one block is left to them; the long sum over K is in full fp32.
#
# A and B are read through tensor descriptors (TMA on Hopper): 16 KiB each per stage, in
# boxes whose rows past M (or N) come back as zeros. K is a multiple of 128 and N of 128.
# kplay: grid=(ceil_div(M,BLOCK_M)*ceil_div(N,BLOCK_N)) BLOCK_M=128 BLOCK_N=128 BLOCK_K=128 GROUP_M=8 num_warps=8 num_stages=4
import os

import triton
import triton.language as tl

SCALE_BLOCK = tl.constexpr(128)  # the scales' block along K (and along N for B)


def _scratch(size: int, alignment: int, stream: int | None):
    """Global memory for the descriptors the kernel builds on the device (128 bytes each)."""
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


# A kernel that makes descriptors on the device asks its launcher for scratch memory, and
# Triton's launcher takes it from the allocator set here, at import, in the thread that
# launches. (The interpreter needs none; a GPU worker's image launcher allocates the
# scratch the image's metadata asks for.)
triton.set_allocator(_scratch)


# Triton's interpreter (the CPU path of the checker) converts float32 to bfloat16 by
# dropping the low 16 bits; the GPU rounds to nearest even. There, and only there, the
# rounding is done by hand on the bits, so that both give the same bf16 values.
ROUND_BY_HAND = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))


@triton.jit
def _to_bf16(x):
    if ROUND_BY_HAND:
        bits = x.to(tl.uint32, bitcast=True)
        bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest, ties to even (finite x)
        return (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return x.to(tl.bfloat16)


@triton.jit
def gemm_fp8(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             GROUP_M: tl.constexpr):
    tl.static_assert(BLOCK_K == SCALE_BLOCK, "one K step per scale block")
    tl.static_assert(BLOCK_N == SCALE_BLOCK, "one scale of B per tile and K step")
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * tiles_n
    first_m = (pid // in_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % in_group) % rows
    pid_n = (pid % in_group) // rows

    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_N, BLOCK_K])
    k_blocks = K // BLOCK_K
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    in_m = rm < M
    a_scale_ptrs = a_scale_ptr + rm * k_blocks  # row m's scales, one per K block
    b_scale_row = b_scale_ptr + pid_n * k_blocks  # this tile's 128 columns of B
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(k_blocks):
        a = a_desc.load([pid_m * BLOCK_M, kb * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, kb * BLOCK_K])
        part = tl.dot(a, b.T)  # fp32, this block of K only
        sa = tl.load(a_scale_ptrs + kb, mask=in_m, other=0.0)
        sb = tl.load(b_scale_row + kb)
        acc += part * (sa[:, None] * sb)

    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c_ptrs, _to_bf16(acc), mask=in_m[:, None] & (rn[None, :] < N))
