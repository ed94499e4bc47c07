# C = A @ B in the CuTe DSL on the CUDA cores: bfloat16 in, fp32 accumulation and output.
# The problem's launch: a 64x64 tile of C per block, 256 threads in a 16x16 grid, each
# thread holding a 4x4 block of accumulators in registers. Per K slice of 16 the block
# stages a 64x16 tile of A and a 16x64 tile of B in shared memory (as fp32, converted
# once on the way in), then every thread runs 16 rank-1 updates from shared memory.
# Elements past M, N or K are read as zero and never written: every load and the store
# of C ask the tile's identity tensor whether their (row, column) is inside the matrix.
# kplay: grid=(ceil_div(N,64),ceil_div(M,64)) block=256 smem=8192
import cutlass
import cutlass.cute as cute

BM, BN, BK = 64, 64, 16  # the block's tile of C and its K slice
TM, TN = 4, 4  # accumulators per thread: rows ty + 16 i, columns tx + 16 j
THREADS = (BM // TM) * (BN // TN)  # 256: the launch's block size


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
    tx = tid % (BN // TN)
    ty = tid // (BN // TN)

    # This block's tiles: gA (BM, BK, k slices), gB (BK, BN, k slices), gC (BM, BN). The
    # identity tensors tiled the same way hold each element's (row, column) in the matrix.
    gA = cute.local_tile(A, (BM, BK), (bm, None))
    gB = cute.local_tile(B, (BK, BN), (None, bn))
    gC = cute.local_tile(C, (BM, BN), (bm, bn))
    cA = cute.local_tile(cute.make_identity_tensor(A.shape), (BM, BK), (bm, None))
    cB = cute.local_tile(cute.make_identity_tensor(B.shape), (BK, BN), (None, bn))
    cC = cute.local_tile(cute.make_identity_tensor(C.shape), (BM, BN), (bm, bn))

    smem = cutlass.utils.SmemAllocator()
    sA = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BM, BK), stride=(BK, 1)), 16)
    sB = smem.allocate_tensor(cutlass.Float32, cute.make_layout((BK, BN), stride=(BN, 1)), 16)

    acc = cute.make_fragment(cute.make_layout((TM, TN), stride=(TN, 1)), cutlass.Float32)
    acc.fill(0.0)

    for kt in range(cute.ceil_div(K, BK)):
        # Each thread stages BM*BK/THREADS elements of A and as many of B; threads next
        # to each other read neighbouring columns of one row (coalesced).
        for it in cutlass.range_constexpr(BM * BK // THREADS):
            r = (tid + it * THREADS) // BK
            c = (tid + it * THREADS) % BK
            a = cutlass.Float32(0.0)
            if cute.elem_less(cA[r, c, kt], A.shape):
                a = gA[r, c, kt].to(cutlass.Float32)
            sA[r, c] = a
        for it in cutlass.range_constexpr(BK * BN // THREADS):
            r = (tid + it * THREADS) // BN
            c = (tid + it * THREADS) % BN
            b = cutlass.Float32(0.0)
            if cute.elem_less(cB[r, c, kt], B.shape):
                b = gB[r, c, kt].to(cutlass.Float32)
            sB[r, c] = b
        cute.arch.sync_threads()

        for kk in cutlass.range_constexpr(BK):
            a_col = [sA[ty + i * (BM // TM), kk] for i in range(TM)]
            b_row = [sB[kk, tx + j * (BN // TN)] for j in range(TN)]
            for i in cutlass.range_constexpr(TM):
                for j in cutlass.range_constexpr(TN):
                    acc[i, j] = acc[i, j] + a_col[i] * b_row[j]
        cute.arch.sync_threads()  # the next slice overwrites sA and sB

    for i in cutlass.range_constexpr(TM):
        for j in cutlass.range_constexpr(TN):
            r = ty + i * (BM // TM)
            c = tx + j * (BN // TN)
            if cute.elem_less(cC[r, c], C.shape):
                gC[r, c] = acc[i, j]
