"""The kernel of bench/fp8_sweep.py: gemm_fp8's block-scaled solution with BLOCK_N any
multiple of 128 (B's scales become a vector along the tile) and an optional persistent walk
over the tiles. Imported after TRITON_INTERPRET is decided.

SCALE picks how the block scales meet the accumulator:
  0  each K step's product goes to a fresh fragment, scaled, then added (the problem's form);
  1  the accumulator is kept in the units of the current K step's scales: before the step it
     is multiplied by (last scales / these scales), then the product accumulates into it in
     the tensor cores (no second fragment: half the registers), and it is multiplied by the
     last scales at the end. Exact in real arithmetic; fp32 rounding differs from 0 by a
     few ulps per step;
  3  as 0, software-pipelined: the step issues its product, then scales and adds the last
     step's, so that the tensor cores may work while the CUDA cores promote (three fragments);
  2  no block scales at all (one scale per tensor, applied once): not gemm_fp8's contract,
     measured as the ceiling of Triton's FP8 dot on this GPU."""

import triton
import triton.language as tl


@triton.jit
def tile_id(t, tiles_m, tiles_n, GROUP_M: tl.constexpr):
    in_group = GROUP_M * tiles_n
    first_m = (t // in_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (t % in_group) % rows, (t % in_group) // rows


@triton.jit
def one_tile(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K, pid_m, pid_n,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             WS: tl.constexpr, SCALE: tl.constexpr):  # fmt: skip
    k_blocks = K // BLOCK_K
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    in_m = rm < M
    a_scale_ptrs = a_scale_ptr + rm * k_blocks
    b_scale_ptrs = b_scale_ptr + (rn // 128) * k_blocks  # one per 128 columns
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    last_a = tl.full((BLOCK_M,), 1.0, tl.float32)
    last_b = tl.full((BLOCK_N,), 1.0, tl.float32)
    last_part = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in tl.range(k_blocks, warp_specialize=WS):  # WS: a producer warp group for TMA
        a = a_desc.load([pid_m * BLOCK_M, kb * BLOCK_K])
        b = b_desc.load([pid_n * BLOCK_N, kb * BLOCK_K])
        if SCALE == 0:
            part = tl.dot(a, b.T)
            sa = tl.load(a_scale_ptrs + kb, mask=in_m, other=0.0)
            sb = tl.load(b_scale_ptrs + kb)
            acc += part * (sa[:, None] * sb[None, :])
        elif SCALE == 1:
            sa = tl.load(a_scale_ptrs + kb, mask=in_m, other=1.0)
            sb = tl.load(b_scale_ptrs + kb)
            acc = acc * ((last_a / sa)[:, None] * (last_b / sb)[None, :])
            acc = tl.dot(a, b.T, acc)
            last_a, last_b = sa, sb
        elif SCALE == 3:
            part = tl.dot(a, b.T)
            acc += last_part * (last_a[:, None] * last_b[None, :])
            last_part = part
            last_a = tl.load(a_scale_ptrs + kb, mask=in_m, other=0.0)
            last_b = tl.load(b_scale_ptrs + kb)
        else:
            acc = tl.dot(a, b.T, acc)
    if SCALE == 3:
        acc += last_part * (last_a[:, None] * last_b[None, :])
    if SCALE == 1:
        acc = acc * (last_a[:, None] * last_b[None, :])
    elif SCALE == 2:
        acc = acc * (tl.load(a_scale_ptr) * tl.load(b_scale_ptr))
    c_ptrs = c_ptr + rm[:, None].to(tl.int64) * N + rn[None, :]
    tl.store(c_ptrs, acc.to(tl.bfloat16), mask=in_m[:, None] & (rn[None, :] < N))


@triton.jit
def gemm_fp8_sweep(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, PERSISTENT: tl.constexpr, WS: tl.constexpr,
                   NUM_PROGS: tl.constexpr, SCALE: tl.constexpr = 0):  # fmt: skip
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BLOCK_M, BLOCK_K])  # fmt: skip
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1],
                                       block_shape=[BLOCK_N, BLOCK_K])  # fmt: skip
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    if PERSISTENT:
        for t in range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGS):
            pid_m, pid_n = tile_id(t, tiles_m, tiles_n, GROUP_M)
            one_tile(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K, pid_m,
                     pid_n, BLOCK_M, BLOCK_N, BLOCK_K, WS, SCALE)  # fmt: skip
    else:
        pid_m, pid_n = tile_id(tl.program_id(0), tiles_m, tiles_n, GROUP_M)
        one_tile(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K, pid_m, pid_n,
                 BLOCK_M, BLOCK_N, BLOCK_K, WS, SCALE)  # fmt: skip
