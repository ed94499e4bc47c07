"""Compiling a learner's source: in this process (trusted callers) or in its box (workers).

A warm evaluator keeps what it compiled or loaded, by backend, source hash and kernel
name, so a repeated run skips the compiler; a GPU kernel loaded from a box's artefact is
launched again without asking any box; a host kernel (numba-cpu) is called again in the
box that compiled it, when the worker gives a job that box again (workers/learner.py).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from cachetools import LRUCache

from kplay.kernels.backends.base import ArrayKind, Backend, Capability, CompiledKernel
from kplay.kernels.models import CompileStage, Diagnostic
from kplay.kernels.remote import ArtifactKernel, BoxClient, HostCall

# Re-running the same source in a warm worker skips the compiler (and the JIT).
_COMPILED: LRUCache[tuple[str, str, str], tuple[CompileStage, CompiledKernel | None]] = LRUCache(
    maxsize=32
)


def compile_cached(
    backend: Backend, source: str, kernel_name: str, workdir: Path
) -> tuple[CompileStage, CompiledKernel | None]:
    key = (backend.key, hashlib.sha256(source.encode()).hexdigest(), kernel_name)
    hit = _COMPILED.get(key)
    if hit is not None:
        return hit[0].model_copy(deep=True), hit[1]
    stage, kernel = backend.compile(source, kernel_name, workdir)
    if stage.ok:
        _COMPILED[key] = (stage.model_copy(deep=True), kernel)
    return stage, kernel


def compile_boxed(
    backend: Backend, cap: Capability, source: str, kernel_name: str, box: BoxClient
) -> tuple[CompileStage, CompiledKernel | None]:
    """The box compiles; a GPU kernel this process has loaded before needs no box at all."""
    export = cap is Capability.run and backend.exports()
    on_gpu = backend.array_kind() in (ArrayKind.cupy, ArrayKind.torch_cuda)
    if cap is Capability.run and not export and on_gpu:
        message = f"the {backend.title} backend cannot build kernels for a separate evaluator"
        return CompileStage(ok=False, log=message, diagnostics=[Diagnostic(message=message)]), None
    key = (backend.key, hashlib.sha256(source.encode()).hexdigest(), kernel_name)
    if export:
        hit = _COMPILED.get(key)
        if hit is not None and isinstance(hit[1], ArtifactKernel):
            hit[1].rebind(box)
            return hit[0].model_copy(deep=True), hit[1]
    else:
        kept = box.kept_kernel(key)
        if kept is not None:
            return kept
    stage, kernel = box.compile(backend, source, kernel_name, export=export)
    if isinstance(kernel, ArtifactKernel) and stage.ok:
        _COMPILED[key] = (stage.model_copy(deep=True), kernel)
    elif isinstance(kernel, HostCall) and stage.ok:
        box.kept[key] = (stage.model_copy(deep=True), kernel)
    return stage, kernel
