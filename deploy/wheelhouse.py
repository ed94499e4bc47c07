"""Assemble a wheelhouse for a GPU host that cannot reach a package index, and install from it.

A bare CUDA image usually has torch, triton, CuPy, llvmlite and the NVIDIA libraries; it
lacks the rest of what Kernel Playground needs (a NumPy below 2.5, Numba and numba-cuda,
pydantic, Celery with its helpers, redis-py, the web stack). On a machine with an index:

    python deploy/wheelhouse.py build OUT                  # wheels for CPython 3.11, x86-64
    python deploy/wheelhouse.py build OUT --redis-deb      # and a Redis server as .deb files
    python deploy/wheelhouse.py build OUT --have freeze.txt   # skip what `pip freeze` there lists

Copy OUT to the host, then in a checkout (or anywhere, for the wheel):

    python3 deploy/wheelhouse.py install OUT --venv /opt/kplay-venv            # the wheel
    python3 deploy/wheelhouse.py install OUT --venv /tmp/kvenv --editable .    # a checkout

`install` makes a virtual environment that sees the host's own packages
(`--system-site-packages`), so torch, triton and CuPy come from the image, and installs
Kernel Playground from the wheelhouse alone (`--no-index`). Redis .deb files are unpacked
with `dpkg -x` into OUT/redis-root; put its usr/bin on PATH.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRAS = "gpu,distributed"
# What a CUDA image with torch, triton and CuPy already carries, and is too large to copy.
PROVIDED = [
    "torch", "triton", "cupy-cuda*", "fastrlock", "nvidia-*", "cuda-bindings", "cuda-python",
    "cuda-toolkit", "llvmlite", "sympy", "mpmath", "networkx",
]  # fmt: skip
# Always copied, even when named above (none today).
ALWAYS: set[str] = set()
COPY_IGNORE = (
    ".git",
    ".venv",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    "node_modules",
    ".whl",
    ".gpu",
    "test-artifacts",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
)
REDIS_DEBS = ["redis-server", "redis-tools", "libjemalloc2", "liblzf1"]


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def _provided(have: Path | None) -> list[str]:
    names = list(PROVIDED)
    if have:
        for line in have.read_text().splitlines():
            name = line.split("==")[0].split(" @ ")[0].strip().lower()
            if name and not name.startswith("#"):
                names.append(name)
    return names


def _skip(name: str, provided: list[str]) -> bool:
    name = name.lower()
    return name not in ALWAYS and any(fnmatch.fnmatch(name, p) for p in provided)


def build(out: Path, python: str, platform: str, have: Path | None, redis_deb: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        # From a copy without build outputs: setuptools would reuse a stale build/ folder.
        source = Path(tmp) / "src"
        shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(*COPY_IGNORE))
        _pip("wheel", "--no-deps", "-q", "-w", str(out.resolve()), str(source))
    (wheel,) = sorted(out.glob("kernel_playground-*.whl"))[-1:]
    # pip matches --platform tags exactly: name the older manylinux tags the host also runs.
    glibc = [platform] + [
        platform.replace("manylinux_2_28", tag)
        for tag in ("manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014")
        if "manylinux_2_28" in platform
    ]
    target = ["--only-binary=:all:", "--python-version", python]
    for tag in glibc:
        target += ["--platform", tag]
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        _pip(
            "install", "--isolated", "--ignore-installed", "--dry-run", "-q", *target,
            "--target", str(Path(tmp) / "t"), "--report", str(report), f"{wheel}[{EXTRAS}]",
        )  # fmt: skip
        items = json.loads(report.read_text())["install"]
    provided = _provided(have)
    pins = sorted(
        f"{i['metadata']['name']}=={i['metadata']['version']}"
        for i in items
        if i["metadata"]["name"] != "kernel-playground"
        and not _skip(i["metadata"]["name"], provided)
    )
    # The build backend, for an editable install of a checkout without an index.
    pins += ["setuptools>=69", "wheel"]
    (out / "requirements.txt").write_text("\n".join(pins) + "\n")
    _pip("download", "--isolated", "--no-deps", "-q", *target, "-d", str(out), *pins)
    if redis_deb:
        debs = out / "deb"
        debs.mkdir(exist_ok=True)
        subprocess.run(["apt-get", "download", *REDIS_DEBS], cwd=debs, check=True)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"wheelhouse {out}: {len(pins) + 1} packages, {size / 2**20:.1f} MiB")


def _see_host_packages(venv: Path) -> None:
    """Let the new venv see the packages of the interpreter that made it.

    `--system-site-packages` shows the base interpreter's folder only; where that
    interpreter is itself a venv (GPU images often keep torch, triton and CuPy in one),
    its packages would be invisible and pip would try to install them from the house.
    A .pth file adds those folders, after the new venv's own, as site folders: their own
    .pth files run too (numba-cuda's, which makes `import numba.cuda` mean numba-cuda and
    not the CUDA target older Numba releases still ship; a plain path line skips them).
    """
    import site

    found = [p for p in site.getsitepackages() if Path(p).is_dir()]
    (own,) = list((venv / "lib").glob("python3*/site-packages"))[:1]
    lines = [f"import site; site.addsitedir({p!r})" for p in found]
    (own / "zz-host-packages.pth").write_text("\n".join(lines) + "\n")


def install(house: Path, venv: Path, editable: Path | None) -> None:
    house = house.resolve()
    if not (venv / "bin" / "python").exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True
        )
        _see_host_packages(venv)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    offline = ["install", "-q", "--no-index", "--find-links", str(house)]
    subprocess.run([*pip, *offline, "-r", str(house / "requirements.txt")], check=True)
    if editable:
        target = [
            "--no-build-isolation", "-e", f"{editable.resolve()}[{EXTRAS}]",
        ]  # fmt: skip
    else:
        (wheel,) = sorted(house.glob("kernel_playground-*.whl"))[-1:]
        target = [f"{wheel}[{EXTRAS}]"]
    subprocess.run([*pip, *offline, *target], check=True)
    debs = sorted((house / "deb").glob("*.deb")) if (house / "deb").is_dir() else []
    if debs and not shutil.which("redis-server"):
        root = house / "redis-root"
        for deb in debs:
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
        print(f"redis-server unpacked: PATH={root}/usr/bin:$PATH")
    print(f"installed into {venv}; activate with . {venv}/bin/activate")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="download the wheels a bare CUDA image lacks")
    b.add_argument("out", type=Path)
    b.add_argument("--python", default="3.11", help="the host's CPython version")
    b.add_argument("--platform", default="manylinux_2_28_x86_64")
    b.add_argument("--have", type=Path, help="`pip freeze` of the host: skip what it has")
    b.add_argument("--redis-deb", action="store_true", help="add Debian's redis-server .debs")
    i = sub.add_parser("install", help="install from a wheelhouse, without an index")
    i.add_argument("house", type=Path)
    i.add_argument("--venv", type=Path, default=Path("/opt/kplay-venv"))
    i.add_argument("--editable", type=Path, help="a checkout to install in editable mode")
    args = parser.parse_args(argv)
    if args.cmd == "build":
        build(args.out, args.python, args.platform, args.have, args.redis_deb)
    else:
        install(args.house, args.venv, args.editable)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
