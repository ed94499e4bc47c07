# A BLOCK_C x BLOCK_L tile at a time: a first loop over the channel blocks adds up the
# squares per position, a second one scales and stores.
import triton
import triton.language as tl


@triton.jit
def rmsnorm(x_ptr, w_ptr, out_ptr, eps, batch, channels, length,
            BLOCK_C: tl.constexpr, BLOCK_L: tl.constexpr):
    pid_l = tl.program_id(0)
    b = tl.program_id(1)
    ls = pid_l * BLOCK_L + tl.arange(0, BLOCK_L)
    lmask = ls < length
    acc = tl.zeros((BLOCK_L,), dtype=tl.float32)
    for c0 in range(0, channels, BLOCK_C):
        cs = c0 + tl.arange(0, BLOCK_C)
        mask = (cs[:, None] < channels) & lmask[None, :]
        offs = (b * channels + cs[:, None]) * length + ls[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        acc += tl.sum(x * x, axis=0)
    inv = 1.0 / tl.sqrt(acc / channels + eps)
    for c0 in range(0, channels, BLOCK_C):
        cs = c0 + tl.arange(0, BLOCK_C)
        mask = (cs[:, None] < channels) & lmask[None, :]
        offs = (b * channels + cs[:, None]) * length + ls[None, :]
        x = tl.load(x_ptr + offs, mask=mask, other=0.0)
        w = tl.load(w_ptr + cs, mask=cs < channels, other=0.0)
        tl.store(out_ptr + offs, x * inv[None, :] * w[:, None], mask=mask)
