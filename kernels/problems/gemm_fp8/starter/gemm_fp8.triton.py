# C = (A_q * a_scale) @ (B_q * b_scale)^T in bfloat16. A_q is M x K and B_q is N x K, both
# float8_e4m3fn and K-major; a_scale (M x K/128) scales each 1x128 block of A, b_scale
# (N/128 x K/128) each 128x128 block of B. K and N are multiples of 128; M may be anything.
# Each program computes one 128x128 tile of C, one 128-wide block of K per step.
# kplay: grid=(ceil_div(M,BLOCK_M),ceil_div(N,BLOCK_N)) BLOCK_M=128 BLOCK_N=128 BLOCK_K=128 num_warps=8
import triton
import triton.language as tl


@triton.jit
def gemm_fp8(a_ptr, b_ptr, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    k_blocks = K // BLOCK_K
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kb in range(k_blocks):
        k = kb * BLOCK_K + rk
        a = tl.load(a_ptr + rm[:, None] * K + k[None, :], mask=rm[:, None] < M, other=0.0)
        b = tl.load(b_ptr + rn[:, None] * K + k[None, :])  # BLOCK_N x BLOCK_K
        # TODO: part = tl.dot(a, b.T) is this block's product in fp32. Scale it by this
        #       block's scales (a_scale[rm, kb] for each row, b_scale[pid_n, kb] for the
        #       tile) and add it to acc.
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc.to(tl.bfloat16),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
