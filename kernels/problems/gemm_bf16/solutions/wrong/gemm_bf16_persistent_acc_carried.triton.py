# WRONG: the accumulator is zeroed once, before the persistent loop, instead of at the
# start of every tile: a program's second tile of C comes out as the sum of its own
# product and that of the tile before it. Right only while every program has one tile.
# kplay: grid=(min(132,ceil_div(M,BLOCK_M)*ceil_div(N,BLOCK_N))) BLOCK_M=128 BLOCK_N=256 BLOCK_K=64 GROUP_M=8 num_warps=8 num_stages=3
import os

import triton
import triton.language as tl

# Triton's interpreter (the CPU path of the checker) multiplies bfloat16 tiles in tl.dot as
# raw 16-bit integers. There, and only there, the operands are widened to float32 first:
# exact, so the arithmetic is the GPU's (bfloat16 products, float32 sums).
WIDEN = tl.constexpr(os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"))


def _scratch(size: int, alignment: int, stream: int | None):
    """Global memory for the descriptors the kernel builds on the device (128 bytes each)."""
    import torch

    return torch.empty(size, dtype=torch.int8, device="cuda")


# A kernel that makes descriptors on the device asks its launcher for scratch memory, and
# Triton's launcher takes it from the allocator set here. (The interpreter needs none.)
triton.set_allocator(_scratch)


@triton.jit
def _mma(a, b, acc):
    if WIDEN:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _tile_coords(tile, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    """(row, column) of tile number `tile` in grouped order: GROUP_M rows at a time."""
    in_group = GROUP_M * tiles_n
    first_m = (tile // in_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (tile % in_group) % rows, (tile % in_group) // rows


@triton.jit
def gemm_bf16(a_ptr, b_ptr, c_ptr, M, N, K,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
              GROUP_M: tl.constexpr):
    HALF_N: tl.constexpr = BLOCK_N // 2
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BLOCK_K, BLOCK_N])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, HALF_N])
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # flatten=True lets Triton pipeline the loads of a program's next tile under the
    # last K steps and the epilogue of the current one.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0),
                         flatten=True):
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        for ks in range(k_steps):
            a = a_desc.load([off_m, ks * BLOCK_K])
            b = b_desc.load([ks * BLOCK_K, off_n])
            acc = _mma(a, b, acc)
        # (BLOCK_M, BLOCK_N) -> two (BLOCK_M, HALF_N) halves: columns [0, HALF_N) and
        # [HALF_N, BLOCK_N), each stored as one box.
        halves = tl.permute(tl.reshape(acc, (BLOCK_M, 2, HALF_N)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left)
        c_desc.store([off_m, off_n + HALF_N], right)
