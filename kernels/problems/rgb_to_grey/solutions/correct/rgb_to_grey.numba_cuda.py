# One thread per pixel on a 2-D grid; both coordinates guarded.
import numpy as np
from numba import cuda


@cuda.jit
def rgb_to_grey(image, grey, height, width):
    x, y = cuda.grid(2)
    if x < width and y < height:
        r = np.int32(image[y, x, 0])
        g = np.int32(image[y, x, 1])
        b = np.int32(image[y, x, 2])
        grey[y, x] = np.uint8((77 * r + 150 * g + 29 * b + 128) >> 8)
