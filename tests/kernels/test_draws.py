"""The counter-based generator every input comes from (kernels.draws).

On the host the compiled loops must give, element for element, what the documented
formula gives in plain Python; on a GPU the device kernels must give the same bits as the
host, so that a large case drawn on the device is the case the host would have drawn.
"""

from __future__ import annotations

import numpy as np
import pytest

from kplay.kernels import draws
from kplay.kernels.catalog import get_problem


def _spread(n: int) -> list[int]:
    return sorted({0, 1, 2, n // 3, n // 2, n - 2, n - 1})


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_every_drawn_element_is_the_documented_formula(dtype: str) -> None:
    d = draws.Draws(0x5EED_1234)
    arrays = [
        d.uniform(3001, -4.0, 4.0, dtype),
        d.normal((37, 41), 0.0, 1.0, dtype),
        d.uniform(2000, 0.99, 0.995, dtype),  # a span that is not a power of two
        d.normal(999, -105.0, 4.0, dtype),
    ]
    for j, arr in enumerate(arrays):
        flat = arr.reshape(-1)
        assert flat.dtype == np.dtype(dtype)
        for i in range(flat.size):
            assert flat[i] == d.element(j, i), (j, i, flat[i], d.element(j, i))


def test_streams_and_seeds_differ_and_repeat() -> None:
    a, b = draws.Draws(7), draws.Draws(7)
    first, second = a.uniform(1000, -1, 1), a.uniform(1000, -1, 1)
    assert not np.array_equal(first, second)  # the next stream is another sequence
    np.testing.assert_array_equal(first, b.uniform(1000, -1, 1))  # same seed, same numbers
    assert not np.array_equal(first, draws.Draws(8).uniform(1000, -1, 1))


def test_the_laws_have_the_moments_they_claim() -> None:
    d = draws.Draws(3)
    u = d.uniform(400_000, -4.0, 4.0).astype(np.float64)
    z = d.normal(400_000, 2.0, 3.0).astype(np.float64)
    assert u.min() >= -4.0 and u.max() <= 4.0 and abs(u.mean()) < 0.02
    assert abs(u.var() - 64 / 12) < 0.05
    assert abs(z.mean() - 2.0) < 0.02 and abs(z.std() - 3.0) < 0.02
    assert np.abs(z - 2.0).max() < 3.0 * 2 * np.sqrt(3.0)  # Irwin-Hall: bounded
    assert np.unique(u).size > 390_000  # 24 bits of each draw: almost no repeats


def test_scalars_and_signs_are_host_values_from_their_own_streams() -> None:
    d = draws.Draws(11)
    x = d.scalar(1.5, 3.0)
    signs = {draws.Draws(s).sign() for s in range(40)}
    assert isinstance(x, float) and 1.5 <= x <= 3.0
    assert signs == {-1.0, 1.0}
    again = draws.Draws(11)
    assert again.scalar(1.5, 3.0) == x


def test_drawing_at_positions_gives_those_elements_of_the_full_draw() -> None:
    full, sparse = draws.Draws(21), draws.Draws(21, np, at=np.array([5, 0, 4999, 77]))
    for _ in range(2):
        a, b = full.uniform(5000, -2.0, 2.0), sparse.uniform(5000, -2.0, 2.0)
        np.testing.assert_array_equal(b, a[[5, 0, 4999, 77]])
        assert full.scalar(0.0, 1.0) == sparse.scalar(0.0, 1.0)  # scalars are the same
        a, b = (
            full.normal((50, 100), 1.0, 3.0, "float16"),
            sparse.normal((50, 100), 1.0, 3.0, "float16"),
        )
        np.testing.assert_array_equal(b, a.reshape(-1)[[5, 0, 4999, 77]])


def test_positions_are_sorted_distinct_and_in_range() -> None:
    pos = draws.positions(99, 10_000, 400, np, stream=2)
    assert pos.dtype == np.int64 and np.all(np.diff(pos) > 0)
    assert pos.min() >= 0 and pos.max() < 10_000 and 350 < pos.size <= 400
    assert not np.array_equal(pos, draws.positions(99, 10_000, 400, np, stream=3))


def test_a_generator_must_return_arrays_of_the_module_it_was_given(monkeypatch) -> None:
    """A large case on a GPU asks for CuPy arrays; a generator that hands back NumPy ones
    (drawn some other way) would send the case across the bus: it is refused by name."""
    import types

    from kplay.kernels import check

    problem = get_problem("vector_add")
    elsewhere = types.SimpleNamespace(__name__="elsewhere")
    with pytest.raises(check.InputError, match="outside the arrays its Draws gives"):
        check._generate(problem, {"n": 8}, 1, elsewhere)
    assert check._generate(problem, {"n": 8}, 1, np)["a"].shape == (8,)


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_the_device_draws_the_host_bits(dtype: str) -> None:
    import cupy

    for law, args in (("uniform", (-1000.0, 1000.0)), ("normal", (0.0, 4.0)),
                      ("uniform", (0.99, 0.995))):  # fmt: skip
        host = getattr(draws.Draws(42, np), law)(3_000_017, *args, dtype)
        dev = getattr(draws.Draws(42, cupy), law)(3_000_017, *args, dtype)
        assert isinstance(dev, cupy.ndarray) and dev.dtype == host.dtype
        np.testing.assert_array_equal(dev.get().view(np.uint8), host.view(np.uint8))
    np.testing.assert_array_equal(
        draws.positions(5, 1 << 22, 1 << 17, cupy, 1).get(),
        draws.positions(5, 1 << 22, 1 << 17, np, 1),
    )


@pytest.mark.gpu
@pytest.mark.parametrize("slug", ["vector_add", "saxpy", "softmax", "sgemm", "hgemm_wmma", "sum"])
def test_every_problem_draws_the_same_case_on_both_sides(slug: str) -> None:
    import cupy

    from kplay.kernels import check

    problem = get_problem(slug)
    case = problem.benchmarks[0]
    params = dict(case.params)
    on_gpu = check.generate_inputs(problem, params, 77, memoise=False, xp=cupy)
    on_host = check.generate_inputs(problem, params, 77, memoise=False, xp=np)
    for name, value in on_host.items():
        got = on_gpu[name]
        if isinstance(value, np.ndarray):
            assert isinstance(got, cupy.ndarray)
            np.testing.assert_array_equal(got.get(), value)
        else:
            assert got == value
    # And the reference computed there agrees with the host's float64 one.
    ref_gpu = check.expected_outputs(problem, params, 77, on_gpu, memoise=False)
    ref_host = check.expected_outputs(problem, params, 77, on_host, memoise=False)
    for name, value in ref_host.items():
        np.testing.assert_allclose(ref_gpu[name].get(), value, rtol=1e-6, atol=1e-7)


@pytest.mark.gpu
def test_a_gpu_run_moves_nothing_case_sized_across_the_bus(monkeypatch) -> None:
    """A full CUDA run of vector_add: no array of the benchmark case's size goes to or
    from the host (inputs drawn, reference computed and outputs compared on the device)."""
    from kplay.kernels import arrays, check
    from kplay.kernels.evaluate import evaluate
    from kplay.kernels.models import RunJob

    problem = get_problem("vector_add")
    limit = int(problem.benchmarks[0].params["n"]) // 4
    moved: list[tuple[str, int]] = []
    real_to_device, real_to_host = arrays.ArrayOps.to_device, arrays.ArrayOps.to_host
    real_numpy = arrays.to_numpy

    def to_device(self, host):  # type: ignore[no-untyped-def]
        if isinstance(host, np.ndarray):
            moved.append(("to device", host.size))
        return real_to_device(self, host)

    def to_host(self, dev):  # type: ignore[no-untyped-def]
        out = real_to_host(self, dev)
        moved.append(("to host", out.size))
        return out

    def to_numpy(arr):  # type: ignore[no-untyped-def]
        out = real_numpy(arr)
        if out is not arr:
            moved.append(("to host", out.size))
        return out

    monkeypatch.setattr(arrays.ArrayOps, "to_device", to_device)
    monkeypatch.setattr(arrays.ArrayOps, "to_host", to_host)
    monkeypatch.setattr(arrays, "to_numpy", to_numpy)
    monkeypatch.setattr(check, "to_numpy", to_numpy)
    source = problem.solution_path("correct", "vector_add.cu").read_text()
    result = evaluate(RunJob(problem="vector_add", backend="cuda", source=source))
    assert result.state.value == "done", result.message
    assert result.timing is not None and result.timing.timed
    assert max(size for _, size in moved) < limit, sorted(moved, key=lambda m: -m[1])[:5]
