"""docker-compose.yml is valid, runs real `kplay` commands and sets only known settings.

Needs the compose tool (Debian's docker-compose 1.29, or the `docker compose` plugin),
not a Docker engine: `config` only parses, validates and resolves the file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import skip_or_fail

ROOT = Path(__file__).resolve().parent.parent


def _compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run(
            [docker, "compose", "version"], capture_output=True, check=False
        ).returncode
        == 0
    ):
        return [docker, "compose"]
    return None


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    yaml = pytest.importorskip("yaml")
    command = _compose_command()
    if command is None:
        skip_or_fail("neither docker-compose nor the docker compose plugin is installed")
        raise AssertionError  # unreachable: skip_or_fail raises
    proc = subprocess.run(
        [*command, "-f", str(ROOT / "docker-compose.yml"), "config"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(yaml.safe_load(proc.stdout))


def _kplay_services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items() if "build" in s}


def test_the_services_of_a_distributed_deployment(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"redis", "postgres", "web", "worker-gpu", "worker-cpu"} <= set(services)
    web_env = services["web"]["environment"]
    assert web_env["KPLAY_BROKER_URL"].startswith("redis://redis:")
    assert web_env["KPLAY_DATABASE_URL"].startswith("postgresql+psycopg://")
    gpu = services["worker-gpu"]["deploy"]["resources"]["reservations"]["devices"]
    assert gpu[0]["driver"] == "nvidia" and "gpu" in gpu[0]["capabilities"]
    assert services["worker-cpu"]["command"] == ["kplay", "worker", "--cpu-only"]


def test_every_command_is_a_real_kplay_subcommand(compose: dict[str, Any]) -> None:
    from kplay.cli import build_parser

    parser = build_parser()
    for name, service in _kplay_services(compose).items():
        command = service.get("command")
        assert isinstance(command, list) and command[0] == "kplay", name
        args = parser.parse_args(command[1:])  # argparse exits on anything unknown
        assert args.command in ("serve", "worker"), name


def test_every_kplay_variable_is_a_setting(compose: dict[str, Any]) -> None:
    from kplay.config import Settings
    from kplay.workers.celery_app import WorkerConfig

    known = {f"KPLAY_{n.upper()}" for n in Settings.model_fields}
    known |= {f"KPLAY_{n.upper()}" for n in WorkerConfig.model_fields}
    named = [
        (service_name, var)
        for service_name, service in compose["services"].items()
        for var in (service.get("environment") or {})
        if var.startswith("KPLAY_")
    ]
    assert named, "the file sets no KPLAY_ variable at all"
    unknown = [f"{s}: {v}" for s, v in named if v not in known]
    assert unknown == []


def test_workers_get_no_database_url(compose: dict[str, Any]) -> None:
    # Workers never touch the database: layers point one way.
    for name in ("worker-gpu", "worker-cpu"):
        assert "KPLAY_DATABASE_URL" not in compose["services"][name]["environment"]


def test_the_image_installs_the_extras_the_services_need() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "ARG EXTRAS=sim,gpu,distributed" in dockerfile
    # The wheel, built in a first stage, is what the image installs: never the checkout.
    assert "pip wheel --no-deps" in dockerfile
    assert 'pip install "$(ls /dist/kernel_playground-*.whl)[${EXTRAS}]"' in dockerfile
    assert "pip install -e" not in dockerfile
