"""The sandbox's parts that need no bubblewrap: its status where it cannot be had, the GPU
device files a child is given, the cgroup folder it would use, the system-call filter and
the read-only view."""

from __future__ import annotations

from pathlib import Path

import pytest

from kplay.kernels.models import RunState
from kplay.workers import sandbox_cgroup, sandbox_view
from kplay.workers.runner import WorkerPool
from kplay.workers.sandbox import SandboxConfig, SandboxUnavailable, prepare
from kplay.workers.sandbox_seccomp import DENIED, filter_program, program_fd
from tests.workers.runner_support import FUNCS, SMALL, job

# ---------------------------------------------------------------- without bubblewrap


def test_auto_without_bubblewrap_runs_plain_children_and_says_so(tmp_path: Path) -> None:
    config = SandboxConfig(mode="auto", bwrap=tmp_path / "no-bwrap")
    with WorkerPool(1, SMALL, target=f"{FUNCS}:ok", sandbox=config) as p:
        assert not p.sandbox.active and p.sandbox.trusted_local_only
        assert "NOT sandboxed" in p.sandbox.summary()
        assert str(tmp_path / "no-bwrap") in p.sandbox.summary()
        assert p.run(job()).state is RunState.done


def test_required_without_bubblewrap_refuses_to_start(tmp_path: Path) -> None:
    with pytest.raises(SandboxUnavailable, match="KPLAY_SANDBOX=required"):
        WorkerPool(
            1,
            SMALL,
            target=f"{FUNCS}:ok",
            sandbox=SandboxConfig(mode="required", bwrap=tmp_path / "none"),
        )


def test_off_is_reported_as_off() -> None:
    sandbox, status = prepare(SandboxConfig(mode="off"))
    assert sandbox is None and not status.active
    assert "KPLAY_SANDBOX=off" in status.summary()


def test_the_settings_choose_the_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KPLAY_SANDBOX", "required")
    monkeypatch.setenv("KPLAY_SANDBOX_TMP_MB", "64")
    monkeypatch.setenv("KPLAY_SANDBOX_RO_PATHS", "/opt/cuda:/opt/extra")
    config = SandboxConfig.from_settings()
    assert config.mode == "required" and config.tmp_bytes == 64 * 1024 * 1024
    assert config.ro_paths == (Path("/opt/cuda"), Path("/opt/extra"))


# ---------------------------------------------------------------- GPU device files


def _driver(root: Path, gpus: list[tuple[str, str, int]]) -> tuple[Path, Path]:
    dev, driver = root / "dev", root / "driver"
    dev.mkdir()
    for name in ("nvidiactl", "nvidia-uvm"):
        (dev / name).touch()
    for bus, uuid, minor in gpus:
        (dev / f"nvidia{minor}").touch()
        folder = driver / bus
        folder.mkdir(parents=True)
        (folder / "information").write_text(
            f"Model: \t NVIDIA H200\nGPU UUID: \t {uuid}\nDevice Minor: \t {minor}\n"
        )
    return dev, driver


def test_visible_gpus_map_to_their_device_files_by_bus_order(tmp_path: Path) -> None:
    # The minor numbers do not follow the bus order here, as happens on real hosts.
    dev, driver = _driver(
        tmp_path, [("0000:1b:00.0", "GPU-aaaa", 2), ("0000:3d:00.0", "GPU-bbbb", 0)]
    )
    names = lambda nodes: [n.name for n in nodes]  # noqa: E731
    assert names(sandbox_view.gpu_nodes("1", dev, driver)) == ["nvidiactl", "nvidia-uvm", "nvidia0"]
    assert names(sandbox_view.gpu_nodes("0", dev, driver))[-1] == "nvidia2"
    assert names(sandbox_view.gpu_nodes("GPU-bbbb,GPU-aaaa", dev, driver))[2:] == [
        "nvidia0",
        "nvidia2",
    ]
    assert names(sandbox_view.gpu_nodes(None, dev, driver))[2:] == ["nvidia0", "nvidia2"]
    assert names(sandbox_view.gpu_nodes("", dev, driver)) == ["nvidiactl", "nvidia-uvm"]
    # CUDA stops at the first entry that names no GPU.
    assert names(sandbox_view.gpu_nodes("1,7,0", dev, driver))[2:] == ["nvidia0"]


def test_without_driver_information_an_index_is_the_minor_number(tmp_path: Path) -> None:
    dev, _ = _driver(tmp_path, [("0000:1b:00.0", "GPU-aaaa", 1)])
    nodes = sandbox_view.gpu_nodes("1", dev, tmp_path / "missing")
    assert [n.name for n in nodes][-1] == "nvidia1"


# ---------------------------------------------------------------- cgroups


def _cgroup_folder(path: Path, offered: str, enabled: str = "") -> Path:
    path.mkdir(parents=True)
    (path / "cgroup.controllers").write_text(offered + "\n")
    (path / "cgroup.subtree_control").write_text(enabled + "\n")
    return path


def test_a_delegated_cgroup_folder_is_used_and_each_box_gets_a_group(tmp_path: Path) -> None:
    base = _cgroup_folder(tmp_path / "delegated", "cpu memory pids", "memory pids")
    assert sandbox_cgroup.find_base(base) == base
    group = sandbox_cgroup.BoxCgroup(base, max_tasks=256)
    assert (group.path / "pids.max").read_text() == "256"
    (group.path / "memory.current").write_text("1000\n")
    group.limit_memory(500)
    assert (group.path / "memory.max").read_text() == "1500"
    (group.path / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert group.oom_kills() == 1
    for name in list(group.path.iterdir()):
        name.unlink()
    group.remove()
    assert not group.path.exists()


def test_a_cgroup_without_the_controllers_is_refused_with_the_reason(tmp_path: Path) -> None:
    base = _cgroup_folder(tmp_path / "plain", "cpu io")
    with pytest.raises(sandbox_cgroup.CgroupUnavailable, match="memory or pids"):
        sandbox_cgroup.find_base(base)
    with pytest.raises(sandbox_cgroup.CgroupUnavailable, match="not a cgroup v2 folder"):
        sandbox_cgroup.find_base(tmp_path)


def test_the_unified_hierarchy_and_the_own_cgroup_are_read_from_proc() -> None:
    mountinfo = (
        "25 1 0:22 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n"
        "30 1 0:27 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n"
    )
    assert sandbox_cgroup.cgroup2_mount(mountinfo) == Path("/sys/fs/cgroup/unified")
    assert sandbox_cgroup.own_cgroup("4:memory:/x\n0::/system.slice/kplay.service\n") == (
        "/system.slice/kplay.service"
    )


# ---------------------------------------------------------------- filter and view


def test_the_filter_is_a_bpf_program_each_sandbox_reads_from_its_start() -> None:
    import os

    program = filter_program()
    assert program and len(program) % 8 == 0  # struct sock_filter is 8 bytes
    fd = program_fd()
    try:
        assert os.read(fd, len(program) + 1) == program
    finally:
        os.close(fd)
    assert {"ptrace", "bpf", "mount", "unshare", "userfaultfd"} <= set(DENIED)


def test_the_view_shows_python_and_hides_what_covers_the_sandboxes_own_folders() -> None:
    import sys

    paths = sandbox_view.python_paths()
    assert any(Path(sys.prefix).resolve().is_relative_to(p.resolve()) for p in paths)
    args, notes = sandbox_view.readonly_args([Path("/"), Path("/usr/lib"), Path("/usr")])
    assert args == ["--ro-bind", "/usr", "/usr"]
    assert notes and "/ is not shown" in notes[0]
    assert sandbox_view.outermost([Path("/usr/lib"), Path("/usr"), Path("/nonexistent")]) == [
        Path("/usr")
    ]
