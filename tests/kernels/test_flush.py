"""The L2 flush before each timed repetition reads its own buffer and nothing beyond it.

It once allocated half the bytes its kernel then read: the sweep ran past the end of its
buffer into whatever the allocator had placed there, and where nothing was mapped the
timed run ended in an illegal-address error (a correct GEMM solution on the H200).
"""

from __future__ import annotations

import pytest


@pytest.mark.gpu
def test_the_sweep_reads_exactly_its_buffer() -> None:
    import cupy

    from kplay.kernels import timing

    flusher = timing._Flusher()
    rows = int(flusher.buf.shape[0])
    assert flusher.buf.nbytes == 16 * rows  # one uint4 a row, as the kernel reads them
    assert flusher.buf.nbytes >= flusher.nbytes  # at least twice the L2, as promised
    # The kernel's bound is read from the buffer's shape; one sweep runs to its end.
    flusher.flush()
    cupy.cuda.Device().synchronize()
