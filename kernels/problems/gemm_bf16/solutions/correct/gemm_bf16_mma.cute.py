# C = A @ B in the CuTe DSL on the tensor cores: bfloat16 in, fp32 accumulation and output.
# A block of 128 threads (four warps) owns a 64x64 tile of C and walks K in 32-wide
# slices. Each slice of A (64x32) and of B (32x64) is staged in shared memory as bf16,
# zeros past the matrix's edges, then read into registers in the fragments the mma.sync
# m16n8k16 atom wants and multiplied with cute.gemm. Four atoms laid out 2x2 make the
# tiled MMA a 32x16x16 step; cute.gemm repeats it 2x4 times over the block's tile.
# Every load and the store of C ask the tile's identity tensor whether their (row,
# column) lies inside the matrix, so M, N and K need not be multiples of the tile.
# kplay: grid=(ceil_div(N,64),ceil_div(M,64)) block=128 smem=9696
import cutlass
import cutlass.cute as cute

BM, BN, BK = 64, 64, 32  # the block's tile of C and its K slice
THREADS = 128  # four warps, 2 x 2 over the tile
PAD = 8  # elements added to each shared row: neighbouring rows start in other banks


@cute.kernel
def gemm_bf16(
    A: cute.Tensor,
    B: cute.Tensor,
    C: cute.Tensor,
    M: cutlass.Int32,
    N: cutlass.Int32,
    K: cutlass.Int32,
):
    tid, _, _ = cute.arch.thread_idx()
    bn, bm, _ = cute.arch.block_idx()  # x walks N, y walks M

    # gA (BM, BK, k slices), gB (BK, BN, k slices), gC (BM, BN), and their coordinates.
    gA = cute.local_tile(A, (BM, BK), (bm, None))
    gB = cute.local_tile(B, (BK, BN), (None, bn))
    gC = cute.local_tile(C, (BM, BN), (bm, bn))
    cA = cute.local_tile(cute.make_identity_tensor(A.shape), (BM, BK), (bm, None))
    cB = cute.local_tile(cute.make_identity_tensor(B.shape), (BK, BN), (None, bn))
    cC = cute.local_tile(cute.make_identity_tensor(C.shape), (BM, BN), (bm, bn))

    # Shared tiles, both indexed (row or column of C, k) as the MMA partitions them:
    # sA (BM, BK) with k contiguous, sB (BN, BK) with n contiguous (B's own order).
    smem = cutlass.utils.SmemAllocator()
    sA = smem.allocate_tensor(
        cutlass.BFloat16, cute.make_layout((BM, BK), stride=(BK + PAD, 1)), 16
    )
    sB = smem.allocate_tensor(
        cutlass.BFloat16, cute.make_layout((BN, BK), stride=(1, BN + PAD)), 16
    )

    # The tensor-core atom: m16n8k16, bf16 operands, fp32 accumulators; four of them.
    atom = cute.nvgpu.warp.MmaF16BF16Op(cutlass.BFloat16, cutlass.Float32, (16, 8, 16))
    mma = cute.make_tiled_mma(atom, (2, 2, 1))
    thr = mma.get_slice(tid)
    tCsA = thr.partition_A(sA)  # this thread's share of the shared tiles
    tCsB = thr.partition_B(sB)
    tCgC = thr.partition_C(gC)
    tCcC = thr.partition_C(cC)
    tCrA = thr.make_fragment_A(tCsA)  # and registers of the same shapes
    tCrB = thr.make_fragment_B(tCsB)
    acc = thr.make_fragment_C(tCgC)
    acc.fill(0.0)

    zero = cutlass.BFloat16(0.0)
    for kt in range(cute.ceil_div(K, BK)):
        # 16 elements of each tile per thread; neighbouring threads read neighbouring
        # columns of one row of A or of B (coalesced).
        for it in cutlass.range_constexpr(BM * BK // THREADS):
            r = (tid + it * THREADS) // BK
            c = (tid + it * THREADS) % BK
            a = zero
            if cute.elem_less(cA[r, c, kt], A.shape):
                a = gA[r, c, kt]
            sA[r, c] = a
        for it in cutlass.range_constexpr(BK * BN // THREADS):
            r = (tid + it * THREADS) // BN  # k
            c = (tid + it * THREADS) % BN  # n
            b = zero
            if cute.elem_less(cB[r, c, kt], B.shape):
                b = gB[r, c, kt]
            sB[c, r] = b
        cute.arch.sync_threads()

        cute.autovec_copy(tCsA, tCrA)
        cute.autovec_copy(tCsB, tCrB)
        cute.gemm(mma, acc, tCrA, tCrB, acc)
        cute.arch.sync_threads()  # the next slice overwrites sA and sB

    for i in cutlass.range_constexpr(cute.size(acc)):
        if cute.elem_less(tCcC[i], C.shape):
            tCgC[i] = acc[i]
