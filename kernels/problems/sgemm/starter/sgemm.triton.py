# C = A @ B with A (M x K), B (K x N) and C (M x N), row-major float32.
# Each program computes one BLOCK_M x BLOCK_N tile of C.
import triton
import triton.language as tl


@triton.jit
def sgemm(a_ptr, b_ptr, c_ptr, M, N, K,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + rk
        # TODO: load the BLOCK_M x BLOCK_K tile of A and the BLOCK_K x BLOCK_N tile of B
        #       at this step (mask what lies outside, fill it with 0) and add their
        #       product to acc with tl.dot(..., input_precision="ieee") for exact fp32.
    inside = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=inside)
