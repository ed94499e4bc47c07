"""The pure parts of the distributed mode: worker plans, routing, limits, estimates."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import pytest

from kplay.kernels.hardware import CpuFacts, GpuFacts, HostFacts
from kplay.kernels.models import RunJob
from kplay.workers.celery_app import WorkerConfig, make_celery
from kplay.workers.celery_executor import route
from kplay.workers.executor import SubmitRefused
from kplay.workers.fleet import wait_estimate_s
from kplay.workers.fleet_main import build_command, build_env, plan_from_args
from kplay.workers.plan import (
    NO_MULTICAST_ENV,
    device_kind,
    plan_workers,
    select_gpus,
    sm_tag,
)


def _h200(index: int, uuid: str) -> GpuFacts:
    return GpuFacts(
        ordinal=index,
        index=index,
        name="NVIDIA H200",
        compute_capability="9.0",
        sm_count=132,
        memory_bytes=143771 * 2**20,
        uuid=uuid,
    )


H200 = [_h200(0, "GPU-aaa"), _h200(1, "GPU-bbb")]
HOST = HostFacts(
    hostname="h",
    cpu=CpuFacts(model="Test CPU", architecture="x86_64", logical_cores=8),
    gpus=tuple(H200),
    driver_version="580.1",
    cuda_driver_version="13.0",
    cache_dir="/tmp/kplay-cache",
)


def test_two_gpus_give_two_pinned_workers_and_a_cpu_worker() -> None:
    specs = plan_workers(HOST.model_copy(update={"hostname": "node1"}), include_cpu=True)
    assert [s.name for s in specs] == ["gpu0@node1", "gpu1@node1", "cpu@node1"]
    gpu0, gpu1, cpu = specs
    assert gpu0.env["CUDA_VISIBLE_DEVICES"] == "0"
    assert gpu1.env["CUDA_VISIBLE_DEVICES"] == "1"
    assert gpu0.queues == ("gpu.any", "gpu.sm90", "gpu.h200") == gpu1.queues
    for spec in (gpu0, gpu1):
        assert spec.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
        assert NO_MULTICAST_ENV.items() <= spec.env.items()
    assert cpu.queues == ("cpu",) and cpu.env == {"CUDA_VISIBLE_DEVICES": ""}
    assert gpu1.info["compute_capability"] == "9.0" and gpu1.info["gpu_index"] == 1
    assert cpu.info["device"] == "Test CPU"


def test_a_gpu_worker_reports_the_host_facts_of_its_device() -> None:
    info = plan_workers(HOST, include_cpu=False)[1].info
    assert (info["uuid"], info["memory_mib"], info["device_kind"]) == ("GPU-bbb", 143771, "h200")
    assert (info["driver"], info["cuda"], info["host"]) == ("580.1", "13.0", "h")


def test_a_host_without_gpus_plans_only_the_cpu_worker() -> None:
    bare = HOST.model_copy(update={"gpus": (), "no_gpu_reason": "cuda-bindings is not installed"})
    assert [s.name for s in plan_workers(bare)] == ["cpu@h"]
    assert plan_workers(bare, include_cpu=False) == []


def test_a_single_gpu_host_needs_no_multicast_switches() -> None:
    [spec] = plan_workers(HOST, gpus=H200[:1], include_cpu=False)
    assert "NCCL_NVLS_ENABLE" not in spec.env


def test_queues_can_be_narrowed_but_not_invented() -> None:
    specs = plan_workers(HOST, include_cpu=True, only_queues=["gpu.sm90"])
    assert [(s.name, s.queues) for s in specs] == [
        ("gpu0@h", ("gpu.sm90",)),
        ("gpu1@h", ("gpu.sm90",)),
    ]
    assert specs[0].info["queues"] == ["gpu.sm90"]
    with pytest.raises(ValueError, match="gpu.sm80"):
        plan_workers(HOST, include_cpu=True, only_queues=["gpu.sm80"])


@pytest.mark.parametrize(
    ("wanted", "indices", "cpu"),
    [(None, [0, 1], True), ("1", [1], False), ("all", [0, 1], False), ("0,cpu", [0], True)],
)
def test_gpus_flag(wanted: str | None, indices: list[int], cpu: bool) -> None:
    gpus, include_cpu = select_gpus(H200, wanted)
    assert [g.index for g in gpus] == indices and include_cpu is cpu


def test_an_unknown_gpu_id_is_named() -> None:
    with pytest.raises(ValueError, match="no GPU with id 7 on this host"):
        select_gpus(H200, "0,7")


def test_plan_from_cli_arguments() -> None:
    args = argparse.Namespace(queues=None, gpus=None, cpu_only=True)
    [spec] = plan_from_args(args, HOST)
    assert spec.name == "cpu@h" and spec.info["device"] == "Test CPU"
    args = argparse.Namespace(queues="gpu.any", gpus="1", cpu_only=False)
    [spec] = plan_from_args(args, HOST)
    assert spec.env["CUDA_VISIBLE_DEVICES"] == "1" and spec.queues == ("gpu.any",)


def test_worker_processes_are_single_job_prefork_workers() -> None:
    [spec] = plan_workers(HOST, gpus=H200[:1], include_cpu=False)
    argv = build_command(spec)
    assert argv[argv.index("--queues") + 1] == "gpu.any,gpu.sm90,gpu.h200"
    assert argv[argv.index("--pool") + 1] == "prefork"
    assert argv[argv.index("--concurrency") + 1] == "1"
    env = build_env(spec, {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1"})
    assert env["CUDA_VISIBLE_DEVICES"] == "0" and env["KPLAY_WORKER_ID"] == "gpu0@h"
    assert json.loads(env["KPLAY_WORKER_INFO"])["device"] == "NVIDIA H200"


def test_names_of_devices_and_capabilities() -> None:
    assert device_kind("NVIDIA H200") == "h200"
    assert device_kind("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert device_kind("Tesla T4") == "t4"
    assert sm_tag("9.0") == "sm90" and sm_tag("12.0") == "sm120"


@pytest.mark.parametrize(
    ("backend", "extra", "queue"),
    [
        ("numba-cpu", {}, "cpu"),
        ("triton", {}, "gpu.any"),
        ("cuda", {"requires": "sm90"}, "gpu.sm90"),
        ("numba-cuda", {"device": "NVIDIA H200"}, "gpu.h200"),
        ("cuda", {"device": "h200", "requires": "sm90"}, "gpu.h200"),
    ],
)
def test_routing(backend: str, extra: dict[str, Any], queue: str) -> None:
    job = RunJob(problem="p", backend=backend, source="s", **extra)
    assert route(job) == queue


def test_a_requirement_that_is_not_a_capability_is_refused() -> None:
    with pytest.raises(SubmitRefused, match="sm90"):
        route(RunJob(problem="p", backend="cuda", source="s", requires="hopper; rm -rf"))


def test_wait_estimate() -> None:
    assert wait_estimate_s(6, 2.0, 3) == 4.0
    assert wait_estimate_s(0, 2.0, 1) == 0.0
    assert wait_estimate_s(4, None, 2) is None
    assert wait_estimate_s(4, 1.0, 0) is None


def test_time_limits_nest_and_celery_is_configured_for_one_job_at_a_time() -> None:
    config = WorkerConfig(broker_url="redis://localhost:1/0", job_timeout_s=30)
    assert config.job_timeout_s < config.soft_time_limit_s < config.hard_time_limit_s
    assert config.hard_time_limit_s < config.visibility_timeout_s
    conf = make_celery(config).conf
    assert conf.task_acks_late and not conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.accept_content == ["json"] and conf.task_serializer == "json"
    assert conf.task_time_limit == config.hard_time_limit_s
    options = conf.broker_transport_options
    assert options["visibility_timeout"] == config.visibility_timeout_s
    assert options["global_keyprefix"] == "kplay:celery:"


def test_the_calibration_command_kplay_worker_runs_exists() -> None:
    """`kplay worker` measures each device with this command, in a child of its own."""
    proc = subprocess.run(
        [sys.executable, "-m", "kplay.kernels.calibrate", "fpga"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert "usage: python -m kplay.kernels.calibrate gpu|cpu" in proc.stderr
