# grey[y, x] = (77 * R + 150 * G + 29 * B + 128) >> 8, with (R, G, B) = image[y, x, 0:3].
# Default launch: a 2-D grid of 16x16 blocks over (x, y), rounded up to whole blocks.
from numba import cuda


@cuda.jit
def rgb_to_grey(image, grey, height, width):
    x, y = cuda.grid(2)
    # TODO: guard x and y, then compute the pixel in int32 and store it.
