"""The wheel runs anywhere: built, installed non-editable into a fresh environment outside
the checkout, served, and used, with nothing but `kplay` installed at the top level.

Slow (it builds a wheel and installs it with its dependencies), so it is marked `slow`;
`.ci/run` runs it with the rest of the suite.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import venv
import zipfile
from pathlib import Path

import httpx
import pytest

from kplay.kernels.models import RunState

ROOT = Path(__file__).resolve().parent.parent
PROBLEM_FOLDERS = sorted(
    p.name for p in (ROOT / "kernels" / "problems").iterdir() if (p / "problem.toml").is_file()
)

pytestmark = pytest.mark.slow


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"{argv[:4]} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _clean_env(home: Path) -> dict[str, str]:
    """The environment of a stranger's shell: no PYTHONPATH, no KPLAY_ settings, own home."""
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("KPLAY_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["HOME"] = str(home)
    env["KPLAY_DATABASE_URL"] = f"sqlite:///{home / 'kplay.sqlite3'}"
    env["KPLAY_CACHE_DIR"] = str(home / "cache")
    return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, str]]:
    """(the fresh environment's bin folder, a working folder outside the checkout, env)."""
    base = tmp_path_factory.mktemp("wheel")
    home = base / "home"
    home.mkdir()
    env = _clean_env(home)
    dist = base / "dist"
    # Built from a copy without build outputs: setuptools would reuse a stale build/ folder.
    source = base / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "node_modules",
            ".whl", "test-artifacts", ".pytest_cache", ".mypy_cache", ".ruff_cache",
        ),
    )  # fmt: skip
    _run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        base,
        {**env, "HOME": os.environ.get("HOME", str(home))},  # the pip cache of this machine
    )
    (wheel,) = dist.glob("kernel_playground-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        tops = {name.split("/", 1)[0] for name in zf.namelist()}
        names = set(zf.namelist())
    assert {t for t in tops if not t.endswith(".dist-info")} == {"kplay"}, tops
    for must in (
        "kplay/templates/base.html",
        "kplay/static/css/book.css",
        "kplay/kernels/problems/vector_add/problem.toml",
        "kplay/app/migrations/versions/0001_runs.py",
    ):
        assert must in names, must
    assert any(n.startswith("kplay/book/") and n.endswith(".md") for n in names)
    assert any(n.startswith("kplay/results/") and n.endswith(".json") for n in names)
    assert not any(n.startswith("kplay/static/editor/") for n in names), "editor sources shipped"

    # A fresh environment without pip of its own: this pip installs into it (--python).
    # Bytecode is written at install: the sandboxed children cannot write it later, and
    # would compile numba's sources on every start.
    target = base / "env"
    venv.EnvBuilder(with_pip=False).create(target)
    bin_dir = target / "bin"
    _run(
        [
            sys.executable, "-m", "pip", "--python", str(bin_dir / "python"),
            "install", "-q", str(wheel),
        ],
        base,
        {**env, "HOME": os.environ.get("HOME", str(home))},
    )  # fmt: skip
    return bin_dir, home, env


def test_only_kplay_is_importable(installed: tuple[Path, Path, dict[str, str]]) -> None:
    bin_dir, home, env = installed
    probe = (
        "import importlib, json\n"
        "out = {}\n"
        "for name in ('app', 'kernels', 'workers', 'kplay.app.main', 'kplay.workers.child'):\n"
        "    try:\n"
        "        importlib.import_module(name); out[name] = 'ok'\n"
        "    except ImportError as exc:\n"
        "        out[name] = type(exc).__name__\n"
        "import kplay\n"
        "out['where'] = kplay.__file__\n"
        "print(json.dumps(out))\n"
    )
    out = json.loads(_run([str(bin_dir / "python"), "-c", probe], home, env))
    assert out["app"] == out["kernels"] == out["workers"] == "ModuleNotFoundError"
    assert out["kplay.app.main"] == out["kplay.workers.child"] == "ok"
    assert str(ROOT) not in out["where"] and "site-packages" in out["where"]


def test_kplay_problems_lists_every_problem(
    installed: tuple[Path, Path, dict[str, str]],
) -> None:
    bin_dir, home, env = installed
    listed = json.loads(_run([str(bin_dir / "kplay"), "problems", "--json"], home, env))
    assert sorted(listed) == PROBLEM_FOLDERS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_served_from_the_wheel_a_run_reaches_done(
    installed: tuple[Path, Path, dict[str, str]],
) -> None:
    bin_dir, home, env = installed
    port = _free_port()
    log = (home / "serve.log").open("w")
    server = subprocess.Popen(
        [str(bin_dir / "kplay"), "serve", "--port", str(port)],
        cwd=home,
        # The first job of a fresh environment compiles everything it needs, on a machine
        # that may be running the rest of the suite: more than the 30 s a job gets by default.
        env={**env, "KPLAY_JOB_TIMEOUT_S": "180"},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        with httpx.Client(base_url=base, timeout=10) as client:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if client.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert server.poll() is None, (home / "serve.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "server did not start in 60 s"
                time.sleep(0.3)
            index = client.get("/")
            assert index.status_code == 200
            chapter_links = [part.split('"', 1)[0] for part in index.text.split('href="/book/')[1:]]
            assert chapter_links, "the table of contents links no chapter"
            chapter = client.get(f"/book/{chapter_links[0]}", follow_redirects=True)
            assert chapter.status_code == 200 and "<h1" in chapter.text
            css = client.get("/static/css/book.css")
            assert css.status_code == 200 and "{" in css.text

            source = (
                ROOT / "kernels/problems/vector_add/solutions/correct/vector_add.numba_cpu.py"
            ).read_text()
            created = client.post(
                "/api/v1/runs",
                json={"problem": "vector_add", "backend": "numba-cpu", "source": source},
            )
            assert created.status_code == 201, created.text
            run_id = created.json()["id"]
            deadline = time.monotonic() + 240
            while True:
                run = client.get(f"/api/v1/runs/{run_id}").json()
                if RunState(run["state"]).is_final:
                    break
                assert time.monotonic() < deadline, f"run still {run['state']} after 240 s"
                time.sleep(0.5)
            assert run["state"] == "done", json.dumps(run)[:2000]
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=30)
        log.close()
