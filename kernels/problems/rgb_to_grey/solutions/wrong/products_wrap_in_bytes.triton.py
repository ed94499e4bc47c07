# Wrong: the channels stay uint8, so 77 * R, 150 * G and 29 * B wrap modulo 256 before
# they are added: every pixel but the darkest comes out wrong.
import triton
import triton.language as tl


@triton.jit
def rgb_to_grey(image_ptr, grey_ptr, height, width, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    pixels = pid * BLOCK + tl.arange(0, BLOCK)
    mask = pixels < height * width
    r = tl.load(image_ptr + 3 * pixels, mask=mask, other=0)
    g = tl.load(image_ptr + 3 * pixels + 1, mask=mask, other=0)
    b = tl.load(image_ptr + 3 * pixels + 2, mask=mask, other=0)
    grey = (r * 77 + g * 150 + b * 29 + 128) >> 8
    tl.store(grey_ptr + pixels, grey.to(tl.uint8), mask=mask)
