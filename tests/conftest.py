"""Shared test configuration.

A test that needs a service (Redis, PostgreSQL, Chromium, a GPU) skips with the reason
on a developer's machine; with KPLAY_REQUIRE_SERVICES=1 (set by CI) the skip of a
`redis`, `postgres`, `browser` or `sandbox` (bubblewrap) test becomes a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kplay.kernels.hardware import prepare_cpu_fallbacks

# The stand-in evaluators of the worker tests live in `tests/`; children and worker
# processes started by the tests find them through the inherited PYTHONPATH (the product
# itself never sets one: children import the installed `kplay`).
_ROOT = str(Path(__file__).resolve().parent.parent)
os.environ["PYTHONPATH"] = os.pathsep.join(
    dict.fromkeys([_ROOT, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
)

# CPU benchmark cases grow to four times the host's last-level cache (kernels.sizing):
# 128 MiB a case on a 32 MiB L3, and the harness draws, checks and re-checks several sets of
# that size per timed run. The suite tests the harness, not DRAM, so it caps the cases at
# their written sizes' scale (48 MiB), which keeps timed CPU runs within the wall limits the
# tests give jobs on a busy 2-core machine; tests/kernels/test_sizing.py checks the sizing
# under the product's own cap. Set before anything loads the catalog (children inherit it).
os.environ.setdefault("KPLAY_CPU_CASE_MAX_MB", "48")

# Numba's simulator and Triton's interpreter must be switched on before any test module
# imports numba.cuda or triton.
prepare_cpu_fallbacks()

REQUIRED_MARKERS = {"redis", "postgres", "browser", "sandbox"}


def services_required() -> bool:
    return os.environ.get("KPLAY_REQUIRE_SERVICES") == "1"


def skip_or_fail(reason: str) -> None:
    """Skip, or fail when CI forbids skipping service tests."""
    if services_required():
        pytest.fail(f"required service missing: {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session", autouse=True)
def _children_share_the_test_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    # Tests hand evaluation children paths under pytest's temporary folder (gates,
    # rendezvous marks); a sandboxed child sees them only in a folder shared with it.
    os.environ["KPLAY_SANDBOX_SHARED_DIRS"] = str(tmp_path_factory.getbasetemp())


@pytest.fixture(autouse=True)
def _servers_keep_wait_durations_in_the_test_folder(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """An embedded executor made by a test keeps its run durations for the machine
    (kplay.app.executors.machine_durations_file) in a folder of that test, not in the user's
    cache folder, where a later `kplay serve` would start its wait estimates from test jobs.
    Settings that name a cache folder keep it."""
    from kplay.app import executors

    real = executors.machine_durations_file

    def kept_here(settings):  # type: ignore[no-untyped-def]
        if settings.cache_dir is not None:
            return real(settings)
        # Made only for the tests that make an executor.
        return tmp_path_factory.mktemp("machine-waits") / f"embedded-{settings.pool_size}.json"

    monkeypatch.setattr(executors, "machine_durations_file", kept_here)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # type: ignore[no-untyped-def]
    outcome = yield
    report = outcome.get_result()
    if not services_required() or not report.skipped:
        return
    markers = {m.name for m in item.iter_markers()}
    # CI has no GPU: a GPU test that also needs Redis may still skip for want of the GPU.
    # Nor does it bound a root worker's processes: a fork bomb waits for a host that does.
    if REQUIRED_MARKERS & markers and not {"gpu", "host_limits"} & markers:
        report.outcome = "failed"
        report.longrepr = f"skipping a service test is forbidden in CI: {report.longrepr}"


def pytest_collection_modifyitems(config, items):  # type: ignore[no-untyped-def]
    from kplay.kernels.hardware import has_cuda_gpu

    # The suite runs on several processes, one file at a time each (pyproject's addopts), in
    # the order collected: the files with `slow` tests go first so that none of them is the
    # last thing running, and the `last` ones after all others, when the other processes
    # are finishing short files. Every process sorts the same way, as xdist requires.
    def files_with(marker: str) -> set[Path]:
        return {item.path for item in items if item.get_closest_marker(marker)}

    slow, last = files_with("slow"), files_with("last")
    items.sort(key=lambda item: (item.path in last, item.path not in slow))
    if has_cuda_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
