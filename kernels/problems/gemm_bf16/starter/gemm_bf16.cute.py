# C = A @ B with A (M x K) and B (K x N) bfloat16, C (M x N) float32, row-major, written
# with the CuTe DSL. K and N are multiples of 8; M may be anything.
# The launch: a 64x64 tile of C per block (grid.x over N, grid.y over M), 256 threads,
# 8192 bytes of dynamic shared memory. Change it with a line like the next one.
# kplay: grid=(ceil_div(N,64),ceil_div(M,64)) block=256 smem=8192
import cutlass
import cutlass.cute as cute

BM, BN, BK = 64, 64, 16  # the block's tile of C and the K slice staged per step


@cute.kernel
def gemm_bf16(
    A: cute.Tensor,
    B: cute.Tensor,
    C: cute.Tensor,
    M: cutlass.Int32,
    N: cutlass.Int32,
    K: cutlass.Int32,
):
    tid, _, _ = cute.arch.thread_idx()  # noqa: F841 - yours to use
    bn, bm, _ = cute.arch.block_idx()  # x walks N, y walks M

    # This block's tiles: cute.local_tile(A, (BM, BK), (bm, None)) is (BM, BK, K slices);
    # B's tiles are (BK, BN, K slices) at (None, bn); C's one (BM, BN) tile is at (bm, bn).
    # The same local_tile of cute.make_identity_tensor(A.shape) gives each element's
    # (row, column), and cute.elem_less(coord, A.shape) says whether it is inside A.
    gC = cute.local_tile(C, (BM, BN), (bm, bn))  # noqa: F841 - yours to use

    # TODO (1): shared tiles from cutlass.utils.SmemAllocator(): allocate_tensor(
    #           cutlass.Float32, cute.make_layout((BM, BK), stride=(BK, 1)), 16) for A and
    #           one (BK, BN) for B: 2 * 64 * 16 * 4 = 8192 bytes, the launch's smem.
    # TODO (2): registers for a 4x4 block of C per thread: cute.make_fragment(
    #           cute.make_layout((4, 4), stride=(4, 1)), cutlass.Float32), then .fill(0.0).
    # TODO (3): for each K slice (range(cute.ceil_div(K, BK))): every thread copies
    #           4 elements of A's tile and 4 of B's into shared memory (x.to(cutlass.Float32),
    #           zero where the element is outside the matrix), cute.arch.sync_threads(),
    #           16 rank-1 updates of its accumulators (cutlass.range_constexpr unrolls),
    #           and a second sync before the next slice overwrites the tiles.
    # TODO (4): store each accumulator into gC where its (row, column) is inside C.
