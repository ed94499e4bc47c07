"""A warp-specialised, persistent Hopper bf16 GEMM in the CuTe DSL (nvidia-cutlass-dsl 4.2.0).

C (M x N) = A (M x K, row-major, K-major) @ B (K x N, row-major), fp32 accumulation, bf16 or
fp32 output. B is read as it lies: viewed as an (N, K) tensor with stride (1, N), an N-major
operand, which wgmma reads from shared memory as it is (no transpose anywhere).

One CTA of 384 threads per SM, looping over 128 x 256 tiles of C in a grouped order:

- warpgroup 0 is the producer: it gives registers back (setmaxnreg 40) and its first warp
  issues the TMA loads of 128 x 64 slices of A and 64 x 256 slices of B, 128-byte swizzled,
  into a ring of STAGES shared-memory stages. Each stage has a full mbarrier (armed with
  the stage's byte count, completed by the TMA) and an empty one (8 arrivals: one per
  consumer warp). The ring runs on across tiles, so the producer loads the next tile while
  the consumers store the last one.
- warpgroups 1 and 2 are the consumers (setmaxnreg 232): each owns 64 rows of the tile and
  issues four m64n256k16 wgmmas per stage, keeping one stage's wgmmas in flight, and frees
  a stage as soon as the wgmmas that read it have retired. The epilogue converts the fp32
  accumulators and stores them from registers straight to global memory.

The shapes are compile-time constants and must be multiples of the tile (M of 128, N of
256, K of 64): the loads rely on TMA's bounds only for the addresses, the stores are not
predicated.
"""

from __future__ import annotations

import cutlass
import cutlass.cute as cute
import cutlass.pipeline as pipeline
import cutlass.utils as utils
import cutlass.utils.hopper_helpers as sm90
from cutlass.cute.nvgpu import cpasync, warpgroup

TILE_M, TILE_N, TILE_K = 128, 256, 64
MMA_K = 16
CONSUMER_WARPGROUPS = 2
THREADS = 128 * (1 + CONSUMER_WARPGROUPS)
PRODUCER_REGS, CONSUMER_REGS = 40, 232
SMEM_BYTES = 227 * 1024


def stage_bytes() -> int:
    """Bytes one stage of the ring holds: a 128 x 64 slice of A and a 64 x 256 one of B."""
    return (TILE_M * TILE_K + TILE_N * TILE_K) * 2


def max_stages() -> int:
    """As many stages as fit beside the mbarriers and the 1 KiB alignment of each buffer."""
    return (SMEM_BYTES - 2048) // stage_bytes()


class HopperGemm:
    """The GEMM for one shape: `cute.compile(HopperGemm(...), a_ptr, b_ptr, c_ptr, stream)`."""

    def __init__(
        self,
        m: int,
        n: int,
        k: int,
        *,
        out_dtype: type = cutlass.BFloat16,
        b_major: str = "n",
        stages: int = 4,
        ctas: int = 132,
        group_m: int = 8,
    ) -> None:
        if m % TILE_M or n % TILE_N or k % TILE_K:
            raise ValueError(f"{m}x{n}x{k}: M, N, K must be multiples of {TILE_M, TILE_N, TILE_K}")
        if b_major not in ("n", "k"):
            raise ValueError("b_major is 'n' (B as given, K x N) or 'k' (B transposed, N x K)")
        if not 2 <= stages <= max_stages():
            raise ValueError(f"stages must be in 2..{max_stages()}")
        self.m, self.n, self.k = m, n, k
        self.out_dtype = out_dtype
        self.b_major = b_major
        self.stages = stages
        self.tiles_m, self.tiles_n = m // TILE_M, n // TILE_N
        self.k_tiles = k // TILE_K
        self.tiles = self.tiles_m * self.tiles_n
        self.ctas = min(ctas, self.tiles)
        # The grouped order walks group_m tile rows down one column of tiles at a time, so
        # that CTAs running together share slices of A and B in L2; a group size that
        # divides the tile rows keeps the arithmetic free of tails.
        self.group_m = next(g for g in (group_m, 8, 4, 2, 1) if self.tiles_m % g == 0)
        self.shared_storage = None

    # Layouts, built while the DSL traces (they need its MLIR context) ---------------------

    def _staged(self, k_major: bool, rows: int) -> cute.ComposedLayout:
        """(rows, TILE_K, stages) in 128B-swizzled GMMA atoms.

        A K-major operand's atom is 8 rows x 64 k (128 bytes of k per row); an N-major one's
        is 64 rows x 8 k (128 bytes of n per k). The N-major atoms are stacked along K
        first, so that one stage is a column of 64 x 64 blocks, each one TMA box.
        """
        kind = warpgroup.SmemLayoutAtomKind
        atom = warpgroup.make_smem_layout_atom(
            kind.K_SW128 if k_major else kind.MN_SW128, cutlass.BFloat16
        )
        order = (0, 1, 2) if k_major else (1, 0, 2)
        return cute.tile_to_shape(atom, (rows, TILE_K, self.stages), order)

    def _tile_coord(self, tile):
        """(tile row, tile column) of the tile-th tile in the grouped order."""
        per_group = self.group_m * self.tiles_n
        group, rest = tile // per_group, tile % per_group
        return group * self.group_m + rest % self.group_m, rest // self.group_m

    # Host ------------------------------------------------------------------------------

    @cute.jit
    def __call__(self, a_ptr: cute.Pointer, b_ptr: cute.Pointer, c_ptr: cute.Pointer, stream):
        m, n, k = self.m, self.n, self.k
        mA = cute.make_tensor(a_ptr, cute.make_layout((m, k), stride=(k, 1)))
        b_stride = (1, n) if cutlass.const_expr(self.b_major == "n") else (k, 1)
        mB = cute.make_tensor(b_ptr, cute.make_layout((n, k), stride=b_stride))
        mC = cute.make_tensor(c_ptr, cute.make_layout((m, n), stride=(n, 1)))

        mode = warpgroup.OperandMajorMode
        b_mode = mode.MN if cutlass.const_expr(self.b_major == "n") else mode.K
        # Two 64 x 256 wgmma atoms stacked along M: one per consumer warpgroup.
        tiled_mma = sm90.make_trivial_tiled_mma(
            cutlass.BFloat16,
            cutlass.BFloat16,
            mode.K,
            b_mode,
            cutlass.Float32,
            (CONSUMER_WARPGROUPS, 1, 1),
            tiler_mn=(64, TILE_N),
        )
        a_layout = self._staged(True, TILE_M)
        b_layout = self._staged(self.b_major == "k", TILE_N)
        load = cpasync.CopyBulkTensorTileG2SOp()
        tma_a, tA = cpasync.make_tiled_tma_atom(
            load, mA, cute.slice_(a_layout, (None, None, 0)), (TILE_M, TILE_K)
        )
        tma_b, tB = cpasync.make_tiled_tma_atom(
            load, mB, cute.slice_(b_layout, (None, None, 0)), (TILE_N, TILE_K)
        )

        @cute.struct
        class SharedStorage:
            barriers: cute.struct.MemRange[cutlass.Int64, 2 * self.stages]
            sA: cute.struct.Align[
                cute.struct.MemRange[cutlass.BFloat16, cute.cosize(a_layout)], 1024
            ]
            sB: cute.struct.Align[
                cute.struct.MemRange[cutlass.BFloat16, cute.cosize(b_layout)], 1024
            ]

        self.shared_storage = SharedStorage
        self.kernel(tma_a, tA, tma_b, tB, mC, tiled_mma, a_layout, b_layout).launch(
            grid=[self.ctas, 1, 1], block=[THREADS, 1, 1], stream=stream
        )

    # Device ----------------------------------------------------------------------------

    @cute.kernel
    def kernel(
        self,
        tma_a: cute.CopyAtom,
        mA: cute.Tensor,
        tma_b: cute.CopyAtom,
        mB: cute.Tensor,
        mC: cute.Tensor,
        tiled_mma: cute.TiledMma,
        a_layout: cute.ComposedLayout,
        b_layout: cute.ComposedLayout,
    ):
        tidx, _, _ = cute.arch.thread_idx()
        bid, _, _ = cute.arch.block_idx()
        warp = cute.arch.make_warp_uniform(cute.arch.warp_idx())
        role = warp // 4  # 0: producer warpgroup, 1 and 2: consumers
        if warp == 0:
            cpasync.prefetch_descriptor(tma_a)
            cpasync.prefetch_descriptor(tma_b)

        storage = utils.SmemAllocator().allocate(self.shared_storage)
        # Full barriers: one arrival (the producer's arrive.expect_tx) plus the stage's
        # bytes. Empty barriers: one arrival from lane 0 of each consumer warp.
        ring = pipeline.PipelineTmaAsync.create(
            barrier_storage=storage.barriers.data_ptr(),
            num_stages=self.stages,
            producer_group=pipeline.CooperativeGroup(pipeline.Agent.Thread),
            consumer_group=pipeline.CooperativeGroup(
                pipeline.Agent.Thread, 4 * CONSUMER_WARPGROUPS
            ),
            tx_count=stage_bytes(),
        )
        sA = storage.sA.get_tensor(a_layout.outer, swizzle=a_layout.inner)
        sB = storage.sB.get_tensor(b_layout.outer, swizzle=b_layout.inner)

        if role == 0:
            cute.arch.warpgroup_reg_dealloc(PRODUCER_REGS)
            if warp == 0:
                self._produce(ring, tma_a, mA, tma_b, mB, sA, sB, bid)
        else:
            cute.arch.warpgroup_reg_alloc(CONSUMER_REGS)
            self._consume(ring, tiled_mma, sA, sB, mC, tidx - 128, role - 1, bid)

    @cute.jit
    def _produce(self, ring, tma_a, mA, tma_b, mB, sA, sB, bid):
        """One warp: for every k slice of every tile, wait for a free stage and load it."""
        state = pipeline.make_pipeline_state(pipeline.PipelineUserType.Producer, self.stages)
        one = cute.make_layout(1)
        for tile in cutlass.range(bid, self.tiles, self.ctas, unroll=1):
            tm, tn = self._tile_coord(tile)
            gA = cute.local_tile(mA, (TILE_M, TILE_K), (tm, None))  # (128, 64, k tiles)
            gB = cute.local_tile(mB, (TILE_N, TILE_K), (tn, None))  # (256, 64, k tiles)
            sA_t, gA_t = cpasync.tma_partition(
                tma_a, 0, one, cute.group_modes(sA, 0, 2), cute.group_modes(gA, 0, 2)
            )
            sB_t, gB_t = cpasync.tma_partition(
                tma_b, 0, one, cute.group_modes(sB, 0, 2), cute.group_modes(gB, 0, 2)
            )
            for kt in cutlass.range(self.k_tiles, unroll=1):
                ring.producer_acquire(state)  # wait until empty, then arm with the bytes
                full = ring.producer_get_barrier(state)
                cute.copy(tma_a, gA_t[(None, kt)], sA_t[(None, state.index)], tma_bar_ptr=full)
                cute.copy(tma_b, gB_t[(None, kt)], sB_t[(None, state.index)], tma_bar_ptr=full)
                ring.producer_commit(state)  # a no-op: the TMA completes the barrier
                state.advance()

    @cute.jit
    def _consume(self, ring, tiled_mma, sA, sB, mC, ctid, wg, bid):
        """One warpgroup: 64 rows of each tile, wgmma from the ring, then the store."""
        # Operands are shared-memory descriptors, the same for every thread of a
        # warpgroup; the accumulator's element-to-coordinate map is per thread.
        thr_wg = tiled_mma.get_slice(wg * 128)
        thr = tiled_mma.get_slice(ctid)
        rA = tiled_mma.make_fragment_A(thr_wg.partition_A(sA))  # (MMA, 1, 4, stages)
        rB = tiled_mma.make_fragment_B(thr_wg.partition_B(sB))  # (MMA, 1, 4, stages)
        acc = cute.make_fragment(thr.partition_shape_C((TILE_M, TILE_N)), cutlass.Float32)
        k_blocks = TILE_K // MMA_K
        tiled_mma.set(warpgroup.Field.ACCUMULATE, True)

        read = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        free = pipeline.make_pipeline_state(pipeline.PipelineUserType.Consumer, self.stages)
        for tile in cutlass.range(bid, self.tiles, self.ctas, unroll=1):
            tm, tn = self._tile_coord(tile)
            acc.fill(0.0)
            # The first k slice: nothing to retire yet.
            ring.consumer_wait(read)
            warpgroup.fence()
            for kb in cutlass.range_constexpr(k_blocks):
                blk = (None, None, kb, read.index)
                cute.gemm(tiled_mma, acc, rA[blk], rB[blk], acc)
            warpgroup.commit_group()
            read.advance()
            for _kt in cutlass.range(1, self.k_tiles, 1, unroll=1):
                ring.consumer_wait(read)
                warpgroup.fence()
                for kb in cutlass.range_constexpr(k_blocks):
                    blk = (None, None, kb, read.index)
                    cute.gemm(tiled_mma, acc, rA[blk], rB[blk], acc)
                warpgroup.commit_group()
                # The previous slice's wgmmas have retired: its stage can be refilled.
                warpgroup.wait_group(1)
                ring.consumer_release(free)
                free.advance()
                read.advance()
            warpgroup.wait_group(0)
            ring.consumer_release(free)
            free.advance()

            gC = cute.local_tile(mC, (TILE_M, TILE_N), (tm, tn))
            cC = thr.partition_C(gC)
            if cutlass.const_expr(self.out_dtype == cutlass.Float32):
                cute.autovec_copy(acc, cC)
            else:
                out = cute.make_fragment_like(acc, self.out_dtype)
                out.store(acc.load().to(self.out_dtype))
                cute.autovec_copy(out, cC)
