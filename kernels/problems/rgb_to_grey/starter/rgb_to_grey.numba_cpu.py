# grey[y, x] = (77 * R + 150 * G + 29 * B + 128) >> 8, with (R, G, B) = image[y, x, 0:3].
# The arrays are uint8: do the arithmetic in a wider integer type.
import numba


@numba.njit
def rgb_to_grey(image, grey, height, width):
    for y in range(height):
        for x in range(width):
            # TODO: read the three bytes of pixel (y, x) and write grey[y, x].
            pass
