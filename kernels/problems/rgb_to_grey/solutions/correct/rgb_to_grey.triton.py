# BLOCK pixels per program, the three channels loaded as bytes and widened to int32.
import triton
import triton.language as tl


@triton.jit
def rgb_to_grey(image_ptr, grey_ptr, height, width, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    pixels = pid * BLOCK + tl.arange(0, BLOCK)
    mask = pixels < height * width
    r = tl.load(image_ptr + 3 * pixels, mask=mask, other=0).to(tl.int32)
    g = tl.load(image_ptr + 3 * pixels + 1, mask=mask, other=0).to(tl.int32)
    b = tl.load(image_ptr + 3 * pixels + 2, mask=mask, other=0).to(tl.int32)
    grey = (77 * r + 150 * g + 29 * b + 128) >> 8
    tl.store(grey_ptr + pixels, grey.to(tl.uint8), mask=mask)
