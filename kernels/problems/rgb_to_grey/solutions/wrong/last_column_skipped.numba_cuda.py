# Wrong: the guard is x < width - 1, so the last column is never written. Wherever that
# column's expected grey equals the fill the checker put in the output, one launch alone
# would pass it; the second launch with the flipped fill catches it.
import numpy as np
from numba import cuda


@cuda.jit
def rgb_to_grey(image, grey, height, width):
    x, y = cuda.grid(2)
    if x < width - 1 and y < height:
        r = np.int32(image[y, x, 0])
        g = np.int32(image[y, x, 1])
        b = np.int32(image[y, x, 2])
        grey[y, x] = np.uint8((77 * r + 150 * g + 29 * b + 128) >> 8)
