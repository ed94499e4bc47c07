"""What an evaluation child does before its first job: imports, the CUDA context, and every
kernel the harness itself runs, compiled (a job must not pay for the harness's builds)."""

from __future__ import annotations

from typing import Any

from kplay.kernels.backends.base import Capability
from kplay.kernels.catalog import get_problem
from kplay.kernels.hardware import prepare_cpu_fallbacks


def warm_up() -> None:
    """Import the libraries and create the CUDA context before any job arrives."""
    prepare_cpu_fallbacks()
    import numba  # noqa: F401

    from kplay.kernels import draws
    from kplay.kernels.backends.base import registry

    draws.warm_up()  # the host generator's loops (compiled once, cached on disk)
    _warm_host_checks()

    for cls in registry().values():
        backend = cls()
        if backend.capability() is Capability.run and backend.key == "cuda":
            import cupy

            cupy.zeros(1).sum()  # creates the context and loads CuPy's kernels
            # The generator's device kernels, and one small case drawn, referenced and
            # compared on the device as a large one is (CuPy builds each kernel on its
            # first use; the first job must not pay for it).
            warm = draws.Draws(1, cupy)
            warm.uniform(4, 0.0, 1.0), warm.normal(4), warm.uniform(4, 0.0, 1.0, "float64")
            _warm_device_case(cupy)
            # Builds (or loads from the cache) the kernels of the on-GPU comparison.
            import numpy

            from kplay.kernels.check import compare_on_device
            from kplay.kernels.problem import Tolerance
            from kplay.kernels.repcheck import count_on_device

            tol = Tolerance(atol=1e-6, rtol=1e-6)
            compare_on_device(cupy.ones(4, dtype=cupy.float32), numpy.ones(4, numpy.float32), tol)
            # And those of the check of every timed repetition, for float32 outputs, in
            # both its forms (a short output, and rows of a long one reduced in parallel).
            for size in (4, 1 << 15):
                ones = cupy.ones(size, dtype=cupy.float32)
                count_on_device(ones, ones, tol).get()


def _warm_device_case(cupy: Any) -> None:
    from kplay.kernels.check import compare_on_device, expected_outputs, generate_inputs
    from kplay.kernels.problem import Tolerance

    problem = get_problem("vector_add")
    params = {"n": 4096}
    inputs = generate_inputs(problem, params, 1, memoise=False, xp=cupy)
    out = expected_outputs(problem, params, 1, inputs, memoise=False)["out"]
    compare_on_device(out.copy(), out, Tolerance(atol=1e-6, rtol=1e-6))
    bool(cupy.array_equal(inputs["a"], inputs["a"].copy()))


def _warm_host_checks() -> None:
    """Compile the one-pass checks of host outputs (kernels.repcheck) for float32."""
    import numpy

    from kplay.kernels.problem import Tolerance
    from kplay.kernels.repcheck import count_on_host, errors_on_host

    ones = numpy.ones(4, dtype=numpy.float32)
    tol = Tolerance(atol=1e-6, rtol=1e-6)
    errors_on_host(ones, ones, tol)
    count_on_host(ones, ones, tol)
