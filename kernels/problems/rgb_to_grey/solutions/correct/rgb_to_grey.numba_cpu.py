# Rows in parallel; the products in int32, the rounding term added before the shift.
import numba
import numpy as np


@numba.njit(parallel=True)
def rgb_to_grey(image, grey, height, width):
    for y in numba.prange(height):
        for x in range(width):
            r = np.int32(image[y, x, 0])
            g = np.int32(image[y, x, 1])
            b = np.int32(image[y, x, 2])
            grey[y, x] = np.uint8((77 * r + 150 * g + 29 * b + 128) >> 8)
