# Persistent bf16 GEMM in Triton with tensor descriptors. The grid is one program per SM
# (132 on an H100 SXM or H200, fewer when C has fewer tiles); each program walks the
# 128x256 tiles of C in grouped order, taking every num_programs-th tile, so the launch
# costs one wave and a program's next tile starts while its last one is being stored.
# The loop strides by tl.num_programs(0), not by a constant: any grid covers every tile.
#
# A, B and C are read and written through tensor descriptors (tl.make_tensor_descriptor):
# on Hopper each load is a TMA copy of the box into shared memory (Triton cuts it into
# 128-byte-wide copies for the swizzle), and the descriptor's bounds handle the edges:
# reads past M, N or K come back as zeros (the K tail adds nothing), and writes past M or
# N are dropped. TMA needs 16-byte aligned row strides, which K and N being multiples of 8
# give (bf16 rows of A and B, fp32 rows of C). Triton's interpreter runs descriptors too:
# the CPU check runs this same code.
# The fp32 tile of C is stored in two 128x128 halves, to keep the epilogue's staging
# buffer at 64 KiB beside 3 stages of 48 KiB of operands.
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
# Triton's launcher takes it from the allocator set here, at import, in the thread that
# launches. (The interpreter needs none; a GPU worker's image launcher allocates the
# scratch the image's metadata asks for.)
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
    # flatten=True lets Triton pipeline the loads of a program's next tile under the
    # last K steps and the epilogue of the current one.
    for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, tl.num_programs(0),
                         flatten=True):
        pid_m, pid_n = _tile_coords(tile, tiles_m, tiles_n, GROUP_M)
        off_m = pid_m * BLOCK_M
        off_n = pid_n * BLOCK_N
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
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
