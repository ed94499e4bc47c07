# Wrong: the float BT.601 weights, truncated to an integer. About a third of the pixels
# land one grey level below the integer formula, which the exact comparison catches (a
# float tolerance of 1 would not).
import numba
import numpy as np


@numba.njit
def rgb_to_grey(image, grey, height, width):
    for y in range(height):
        for x in range(width):
            v = 0.299 * image[y, x, 0] + 0.587 * image[y, x, 1] + 0.114 * image[y, x, 2]
            grey[y, x] = np.uint8(int(v))
