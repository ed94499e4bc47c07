# grey[p] = (77 * R + 150 * G + 29 * B + 128) >> 8 for every pixel p = y * width + x;
# the image's bytes of pixel p are at 3 * p, 3 * p + 1 and 3 * p + 2.
# Default launch: ceil_div(height * width, BLOCK) programs of BLOCK pixels each.
import triton
import triton.language as tl


@triton.jit
def rgb_to_grey(image_ptr, grey_ptr, height, width, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    pixels = pid * BLOCK + tl.arange(0, BLOCK)
    mask = pixels < height * width
    # TODO: load the three channels (as int32), combine them and store the bytes.
