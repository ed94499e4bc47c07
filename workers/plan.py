"""Which worker processes a host runs: one per GPU, pinned to it, plus one CPU worker.

Pure: the host's facts (`kplay.kernels.hardware.HostFacts`) in, one `WorkerSpec` per
process out, so any machine can test a plan for any other. GPU worker *i* gets
`CUDA_VISIBLE_DEVICES=i` (nvidia-smi's numbering, hence `CUDA_DEVICE_ORDER=PCI_BUS_ID`) and
consumes `gpu.any`, `gpu.sm<cc>` and `gpu.<model>`; the CPU worker consumes `cpu` with
the GPUs hidden.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kplay.kernels.hardware import GpuFacts, HostFacts

# On multi-GPU hosts nothing a job does may switch NVLink multicast on: it needs fabric
# state a pinned single-device worker cannot set up, and it fails in ways that look like
# kernel bugs.
NO_MULTICAST_ENV = {
    "NCCL_NVLS_ENABLE": "0",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1",
    "NVSHMEM_DISABLE_NVLS": "1",
}


@dataclass(frozen=True)
class WorkerSpec:
    """One worker process: its registry id, queues, pinned environment and device facts."""

    name: str
    kind: str  # "gpu" or "cpu"
    queues: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- naming


def device_kind(name: str) -> str:
    """'NVIDIA H200' -> 'h200': the slug of a device model, used in queue names."""
    bare = re.sub(r"^(NVIDIA|Tesla)\s+", "", name.strip(), flags=re.IGNORECASE)
    return re.sub(r"[^a-z0-9]+", "-", bare.lower()).strip("-") or "gpu"


def sm_tag(compute_capability: str) -> str:
    """'9.0' -> 'sm90'."""
    major, _, minor = compute_capability.partition(".")
    return f"sm{int(major)}{int(minor or 0)}"


PROFILE_QUEUE = "gpu.profile"


def gpu_queues(gpu: GpuFacts) -> tuple[str, ...]:
    return ("gpu.any", f"gpu.{sm_tag(gpu.compute_capability)}", f"gpu.{device_kind(gpu.name)}")


# ---------------------------------------------------------------- the plan


def plan_workers(
    host: HostFacts,
    *,
    gpus: Sequence[GpuFacts] | None = None,
    include_cpu: bool = True,
    only_queues: list[str] | None = None,
) -> list[WorkerSpec]:
    """One worker per GPU (`gpus`, by default all of the host's), plus one CPU worker.

    With `only_queues`, each worker keeps only those of its queues; a worker left with
    none is not started. Raises ValueError for a queue no planned worker could consume.
    """
    chosen = host.gpus if gpus is None else tuple(gpus)
    specs = [_gpu_spec(g, host, multi=len(chosen) > 1) for g in chosen]
    if include_cpu:
        specs.append(_cpu_spec(host))
    if only_queues is None:
        return specs
    offered = {q for s in specs for q in s.queues}
    unknown = [q for q in only_queues if q not in offered]
    if unknown:
        raise ValueError(
            f"no worker on this host can consume {', '.join(unknown)}; "
            f"it offers {', '.join(sorted(offered)) or 'nothing'}"
        )
    kept = []
    for spec in specs:
        queues = tuple(q for q in spec.queues if q in only_queues)
        if queues:
            info = {**spec.info, "queues": list(queues)}
            kept.append(WorkerSpec(spec.name, spec.kind, queues, spec.env, info))
    return kept


def _gpu_spec(gpu: GpuFacts, host: HostFacts, multi: bool) -> WorkerSpec:
    name = f"gpu{gpu.index}@{host.hostname}"
    # A host with Nsight Compute takes profiles too, one at a time per GPU (workers/profiling).
    # Profiles of arch-specific cells (sm_90a) wait on the queue of their compute capability.
    profiles = (PROFILE_QUEUE, f"{PROFILE_QUEUE}.{sm_tag(gpu.compute_capability)}")
    queues = gpu_queues(gpu) + (profiles if host.profiler else ())
    env = {"CUDA_VISIBLE_DEVICES": str(gpu.index), "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    if multi:
        env.update(NO_MULTICAST_ENV)
    info = {
        "id": name,
        "host": host.hostname,
        "kind": "gpu",
        "device": gpu.name,
        "device_kind": device_kind(gpu.name),
        "gpu_index": gpu.index,
        "uuid": gpu.uuid,
        "compute_capability": gpu.compute_capability,
        "driver": host.driver_version,
        "cuda": host.cuda_driver_version,
        "memory_mib": gpu.memory_mib,
        "queues": list(queues),
    }
    return WorkerSpec(name, "gpu", queues, env, info)


def _cpu_spec(host: HostFacts) -> WorkerSpec:
    name = f"cpu@{host.hostname}"
    # Hidden GPUs keep CPU jobs from touching a device another worker owns.
    env = {"CUDA_VISIBLE_DEVICES": ""}
    info = {
        "id": name,
        "host": host.hostname,
        "kind": "cpu",
        "device": host.cpu.model,
        "queues": ["cpu"],
    }
    return WorkerSpec(name, "cpu", ("cpu",), env, info)


def select_gpus(gpus: Sequence[GpuFacts], wanted: str | None) -> tuple[list[GpuFacts], bool]:
    """Apply `--gpus` ("0,1", "all", "0,cpu"): the GPUs kept and whether a CPU worker runs.

    Without the flag every GPU and the CPU are used; with it, the CPU only when named.
    """
    if wanted is None:
        return list(gpus), True
    tokens = [t.strip() for t in wanted.split(",") if t.strip()]
    include_cpu = "cpu" in tokens
    ids = [t for t in tokens if t not in ("cpu", "all")]
    if "all" in tokens:
        return list(gpus), include_cpu
    by_index = {str(g.index): g for g in gpus}
    missing = [i for i in ids if i not in by_index]
    if missing:
        have = ", ".join(by_index) or "none"
        raise ValueError(f"no GPU with id {', '.join(missing)} on this host (ids: {have})")
    return [by_index[i] for i in ids], include_cpu


# ---------------------------------------------------------------- ceilings


def load_ceilings(info: dict[str, Any]) -> dict[str, Any] | None:
    """A planned worker's device ceilings: calibrated if cached, else datasheet (GPUs)."""
    from kplay.kernels import roofline

    device = info.get("device")
    if not device:
        return None
    found = (
        roofline.ceilings_for(device)
        if info.get("kind") == "gpu"
        else roofline.load_calibrated(device)
    )
    return None if found is None else found.model_dump(mode="json")
