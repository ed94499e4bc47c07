# case: a kernel that writes nothing, and a Python wrapper around its launch that does the work on another CUDA stream instead
# class: work after return
# expect: wrong
# evidence: not-verified
#
# The learner's module replaces the launch of its (empty) kernel with a launch of an
# honest one on a stream of its own, which the harness's timing events on its stream
# would not wait for. On a GPU the learner's box only builds the kernel's image, and the
# evaluator launches that image itself: the empty kernel runs, the output stays poison.
# A case for a GPU: in Numba's simulator the box runs the launch itself, wrapper and
# all, and the output is right; a simulated run is never timed nor verified, so the
# trick gains nothing there.
from numba import cuda


@cuda.jit
def add(a, b, out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = a[i] + b[i]


@cuda.jit
def vector_add(a, b, out, n):
    pass


class SideStream:
    def __init__(self, grid, block):
        self.grid, self.block = grid, block

    def __call__(self, *args):
        add[self.grid, self.block, cuda.stream()](*args)


def configure(config):
    return SideStream(config[0], config[1])


# The dispatcher's launch configuration, replaced on this one object.
patched = type("Patched", (type(vector_add),), {"__getitem__": lambda self, c: configure(c)})
vector_add.__class__ = patched
