"""Every extra resolves from the public package index alone.

`pip install --isolated` ignores the environment and the user's pip configuration, and
PIP_CONFIG_FILE=os.devnull (read even in isolated mode) the global and site configuration
too (local wheel folders, extra indexes, constraints): the resolution below is the one a
stranger's machine gets. No PIP_ variable reaches pip's own subprocess either (the one that
installs the build dependencies). `--dry-run --ignore-installed` installs nothing, and with
`fast-deps` a pip of 25.3 or newer (the `test` extra asks for one) reads each wheel's metadata
with range requests instead of downloading the wheel: the CUDA builds of torch and its
libraries are several GB per extra.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = ("sim", "test", "gpu", "distributed")

pytestmark = pytest.mark.slow


def _public_index_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    return env


def _resolve(extra: str, report: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--isolated", "--ignore-installed",
            "--dry-run", "--quiet", "--disable-pip-version-check", "--use-feature=fast-deps",
            "--report", str(report), f"{ROOT}[{extra}]",
        ],
        capture_output=True, text=True, timeout=900, check=False, env=_public_index_env(),
    )  # fmt: skip


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    folder = tmp_path_factory.mktemp("resolve")
    with ThreadPoolExecutor(len(EXTRAS)) as pool:
        done = dict(
            zip(EXTRAS, pool.map(lambda e: _resolve(e, folder / f"{e}.json"), EXTRAS), strict=True)
        )
    out: dict[str, dict] = {}
    for extra, proc in done.items():
        assert proc.returncode == 0, f".[{extra}] does not resolve:\n{proc.stderr[-4000:]}"
        data = json.loads((folder / f"{extra}.json").read_text())
        local = [
            i["download_info"]["url"]
            for i in data["install"]
            if not i["download_info"]["url"].startswith("https://")
            and i["metadata"]["name"] != "kernel-playground"
        ]
        assert not local, f".[{extra}] took packages from this machine: {local}"
        out[extra] = {
            i["metadata"]["name"].lower(): i["metadata"]["version"] for i in data["install"]
        }
    return out


@pytest.mark.parametrize("extra", EXTRAS, ids=lambda e: f"extra-{e}")
def test_extra_resolves_from_the_public_index(reports: dict[str, dict], extra: str) -> None:
    versions = reports[extra]
    assert "kernel-playground" in versions
    assert "numba" in versions and "fastapi" in versions


def test_torch_and_triton_are_a_pair_torch_ships_with(reports: dict[str, dict]) -> None:
    """The sim extra pins both; the resolver found them compatible, so the pair is torch's own."""
    sim = reports["sim"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = {
        r.split("==")[0]: r.split("==")[1]
        for r in project["optional-dependencies"]["sim"]
        if r.startswith(("torch==", "triton=="))
    }
    assert sim["torch"] == pins["torch"] and sim["triton"] == pins["triton"]
    assert "cupy-cuda13x" in reports["gpu"] and "celery" in reports["distributed"]
