"""Triton's own listings between the Python source and PTX: TTIR, TTGIR and LLVM IR, and
what a kernel run in Triton's interpreter would have become on a GPU.

On a machine without a GPU, Triton runs a kernel in its interpreter, which compiles
nothing. After the checks, `interpreted_listings` builds the same kernel for the engine's
CUDA target without running it, as the learner's box does on a GPU host (`TritonExporter`,
from a launch's own arguments), so the compiler panel can show its TTIR, TTGIR, LLVM IR,
PTX and SASS. It does so in a fresh Python process with the interpreter off: in this
one, Triton's own library functions (tl.sum, tl.cdiv...) were made interpreted at import
and cannot be compiled.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kplay.kernels.backends.cuda_source import normalise_arch
from kplay.kernels.backends.pysource import SOURCE_STEM
from kplay.kernels.backends.toolkit_parse import truncate
from kplay.kernels.backends.toolkit_run import TEXT_LIMIT_BYTES
from kplay.kernels.models import CompileStage

# In the order Triton lowers through them, with the names a reader knows them by.
IR_NAMES = {"ttir": "TTIR", "ttgir": "TTGIR", "llir": "LLVM IR"}
LISTINGS_TIMEOUT_S = 90.0


def ir_listings(asm: Any) -> dict[str, str]:
    """The IR texts of a compiled kernel's `asm`, each cut to the listing limit."""
    if not hasattr(asm, "get"):
        return {}
    found = {key: asm.get(key) for key in IR_NAMES}
    return {
        key: truncate(text, TEXT_LIMIT_BYTES, IR_NAMES[key])
        for key, text in found.items()
        if isinstance(text, str) and text
    }


def target_cc(arch: str | None = None) -> tuple[int, int]:
    """'sm_90a' -> (9, 0): the compute capability Triton is asked to compile for."""
    if arch is None:
        from kplay.config import EngineSettings

        arch = EngineSettings().cuda_arch
    digits = "".join(ch for ch in normalise_arch(arch) if ch.isdigit())
    return int(digits[:-1]), int(digits[-1])


def launch_variant(args: list[Any], spec: Any) -> Any:
    """The variant a GPU build would make of this launch; None where it cannot tell."""
    from kplay.kernels.remote import variant_of

    try:
        return variant_of("triton", args, spec)
    except Exception:  # noqa: BLE001 - an argument no image could take: no listings
        return None


def plain_variant(variant: Any) -> bool:
    """No integer argument equal to 1, which Triton would compile in as a constant."""
    return not any(
        a.kind == "scalar" and a.value == 1 and a.dtype.startswith(("int", "uint"))
        for a in variant.args
    )


class ListingBuild:
    """A compile-only build of an interpreted kernel, in a fresh process of its own.

    It starts at a launch and is collected after the checks, so that the import of Triton
    and torch in the new process overlaps the interpreter's work. The process stays in
    the job's process group: a job ended from outside ends it too.
    """

    def __init__(
        self, source: str, name: str, workdir: Path, variant: Any, arch: str | None = None
    ) -> None:
        self.started = time.perf_counter()
        self.folder = workdir / "listings"
        self.folder.mkdir(parents=True, exist_ok=True)
        request = {"source": source, "name": name, "variant": variant.model_dump(mode="json"),
                   "cc": list(target_cc(arch))}  # fmt: skip
        (self.folder / "request.json").write_text(json.dumps(request))
        self.answer = self.folder / "stage.json"
        self.answer.unlink(missing_ok=True)
        env = {**os.environ, "TRITON_INTERPRET": "0"}
        cmd = [sys.executable, "-m", "kplay.kernels.backends.triton_listings", str(self.folder)]
        self.proc: subprocess.Popen[bytes] | None = None
        try:
            self.proc = subprocess.Popen(
                cmd, cwd=self.folder, env=env, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
        except OSError:
            self.proc = None

    def finish(self) -> CompileStage | None:
        """The build's stage; None where it failed or took longer than the limit.

        None also where the kernel cannot be built here (no Triton backend for CUDA, a
        kernel only the interpreter accepts): the listings are an extra, never a reason
        for a run to fail.
        """
        if self.proc is None:
            return None
        left = LISTINGS_TIMEOUT_S - (time.perf_counter() - self.started)
        try:
            self.proc.wait(timeout=max(left, 0.1))
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        try:
            stage = CompileStage.model_validate_json(self.answer.read_text())
        except (OSError, ValueError):
            return None
        stage.duration_ms = (time.perf_counter() - self.started) * 1e3
        return stage


def interpreted_listings(
    source: str, name: str, workdir: Path, variant: Any, arch: str | None = None
) -> CompileStage | None:
    """What the interpreted kernel becomes when Triton compiles it for `arch`, not run."""
    return ListingBuild(source, name, workdir, variant, arch).finish()


_LEARNER_PATH = re.compile(rf'[^"\s:(]*/({SOURCE_STEM}\w*\.py)')
_LEARNER_DIR = re.compile(rf'(filename: "{SOURCE_STEM}\w*\.py", directory: )"[^"]*"')


def plain(text: str) -> str:
    """A listing with the learner's file named without its folder."""
    return _LEARNER_DIR.sub(r'\1"."', _LEARNER_PATH.sub(r"\1", text))


def _build(folder: Path) -> None:
    """In the fresh process: load the learner's module, build it, leave the stage."""
    from kplay.kernels.artifact import Variant
    from kplay.kernels.backends import pysource
    from kplay.kernels.backends.triton_artifact import TritonExporter

    request = json.loads((folder / "request.json").read_text())
    source, name = request["source"], request["name"]
    loaded, failed = pysource.load_source(source, folder)
    if loaded is None or failed is not None:
        return
    cc = (int(request["cc"][0]), int(request["cc"][1]))
    exporter = TritonExporter(getattr(loaded.module, name), loaded.path, name, source, cc)
    # An autotuned kernel: its first config, as the report of a GPU run shows.
    config = exporter.tuner.configs[0] if exporter.tuner is not None else None
    artifact = exporter.build_one(Variant.model_validate(request["variant"]), config)
    if artifact.stage is None:
        return
    stage = artifact.stage
    # Private folders mean nothing to a reader (and a cached build names an older one).
    stage.ir = {key: plain(text) for key, text in stage.ir.items()}
    stage.ptx = plain(stage.ptx) if stage.ptx else stage.ptx
    stage.log = (
        f"compiled for sm_{cc[0]}{cc[1]} without running, to show its listings "
        f"(the run used Triton's interpreter): {stage.log}"
    )
    (folder / "stage.json").write_text(stage.model_dump_json())


if __name__ == "__main__":
    _build(Path(sys.argv[1]))
