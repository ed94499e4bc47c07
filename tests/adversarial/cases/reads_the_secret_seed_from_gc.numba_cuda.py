# case: look through every object of the interpreter (gc.get_objects) for the run's secret seeds, and only compute the answer if they are found
# class: stack walking
# expect: wrong
# expect-simulated: wrong
# evidence: output-has seeds: (found|not found)
# evidence: output-lacks seeds: found
#
# A real run's inputs come from a seed drawn in the evaluator and never recorded
# (kernels.seeds.RunSeeds). Where learner code shared the evaluator's interpreter, the
# garbage collector's list of objects held it, and the harness's inputs, references and
# rotations could all be recomputed. This kernel defines a kernel that adds only if it
# found the seeds, and one that writes nothing otherwise: in its own box it finds none.
import gc

from numba import cuda

found = [o for o in gc.get_objects() if type(o).__name__ in ("RunSeeds", "PreparedCase", "Memo")]
print("seeds: found" if found else "seeds: not found", len(found))

if found:

    @cuda.jit
    def vector_add(a, b, out, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a[i] + b[i]

else:

    @cuda.jit
    def vector_add(a, b, out, n):
        pass
