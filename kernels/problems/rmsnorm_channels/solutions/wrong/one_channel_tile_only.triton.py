# Wrong: the channels are read as one tile of BLOCK_C, with no loop over channel blocks;
# right whenever channels <= BLOCK_C, and channels past the first tile are never written.
import triton
import triton.language as tl


@triton.jit
def rmsnorm(x_ptr, w_ptr, out_ptr, eps, batch, channels, length,
            BLOCK_C: tl.constexpr, BLOCK_L: tl.constexpr):
    pid_l = tl.program_id(0)
    b = tl.program_id(1)
    ls = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    cs = tl.arange(0, BLOCK_C)
    mask = (cs[:, None] < channels) & (ls[None, :] < length)
    offs = (b * channels + cs[:, None]) * length + ls[None, :]
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / channels + eps)
    w = tl.load(w_ptr + cs, mask=cs < channels, other=0.0)
    tl.store(out_ptr + offs, x * inv[None, :] * w[:, None], mask=mask)
