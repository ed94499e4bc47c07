"""The distributed mode on a GPU host: detection, pinning and a real CUDA kernel."""

from __future__ import annotations

import sys

import pytest

from kplay.kernels import hardware
from kplay.kernels.models import RunState
from kplay.workers.plan import plan_workers, sm_tag
from tests.workers.celery_support import (  # noqa: F401 - fixtures
    ROOT,
    Deployment,
    RecordingSink,
    deployment_fixture,
    job,
    redis_base_fixture,
    wait_for,
)

pytestmark = pytest.mark.gpu


def test_gpus_are_found_with_their_capability() -> None:
    host = hardware.host()
    gpus = host.gpus
    assert gpus, "a GPU host must report at least one GPU"
    assert [g.index for g in gpus] == list(range(len(gpus)))
    for gpu in gpus:
        assert gpu.name and gpu.compute_capability
        assert gpu.compute_capability.replace(".", "").isdigit()
    specs = plan_workers(host, include_cpu=True)
    assert [s.env["CUDA_VISIBLE_DEVICES"] for s in specs[:-1]] == [str(g.index) for g in gpus]
    assert f"gpu.{sm_tag(gpus[0].compute_capability)}" in specs[0].queues


@pytest.mark.redis
@pytest.mark.slow
def test_a_gpu_worker_runs_a_cuda_kernel_on_its_own_device(deployment: Deployment) -> None:
    env = {**deployment.env}
    del env["KPLAY_EVAL_TARGET"]  # the real engine
    deployment.spawn(
        [sys.executable, "-m", "kplay.cli", "worker", "--gpus", "0"], env, "kplay-gpu-worker"
    )
    worker = wait_for(lambda: next(iter(deployment.live()), None), 120, "the GPU worker")
    assert worker.id.startswith("gpu0@") and worker.kind == "gpu"
    assert worker.compute_capability and worker.ceilings is not None
    requires = sm_tag(worker.compute_capability)
    assert f"gpu.{requires}" in worker.queues

    sink = RecordingSink()
    ex = deployment.executor(sink)
    source = ROOT / "kernels/problems/vector_add/solutions/correct/vector_add.cu"
    run = job(source.read_text(), backend="cuda", requires=requires)
    ex.submit(run)
    result = sink.wait(run.job_id, timeout_s=240)
    assert result.state is RunState.done, result.message
    assert result.system is not None and result.system.kind == "gpu"
    assert result.timing is not None and result.timing.timed
    assert ex.store.finished(run.job_id).worker == worker.id
