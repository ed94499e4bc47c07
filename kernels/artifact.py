"""What crosses from the learner's box to the trusted evaluator: requests and artefacts.

Learner code (its Python, its compile, the host side of its kernels) runs in a box of
its own; the evaluator that makes inputs, checks outputs and takes the time never
imports it. For a GPU backend the box compiles and hands back an `Artifact`, a loadable
image (cubin or PTX) with what a launch needs, which the evaluator loads and launches
itself. For a host backend (Numba on the CPU, Numba's CUDA simulator, Triton's
interpreter) the box keeps the function and runs it on arrays in shared memory, and the
evaluator's own clock times the call.

A `Variant` says what one launch looks like (argument kinds, dtypes, scalar values,
the launch's compile-time constants); a backend that specialises on those (Triton)
builds one artefact per variant, lazily, as the evaluator meets them.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from kplay.kernels.models import CompileStage


class ArgSpec(BaseModel):
    """One kernel argument as a launch passes it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["array", "scalar"]
    dtype: str  # NumPy's name: float32, int32, float16...
    ndim: int = 0  # arrays only
    # Scalars only: the value, for backends that specialise on it (Triton's ==1, %16).
    value: float | int | None = None


class Variant(BaseModel):
    """Everything a backend may compile differently for: one per distinct launch shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    args: tuple[ArgSpec, ...]
    constants: tuple[tuple[str, int], ...] = ()
    num_warps: int | None = None
    num_stages: int | None = None

    def key(self) -> str:
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:24]


class Artifact(BaseModel):
    """A loadable kernel image and what launching it needs, built in the box."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    format: Literal["cubin", "ptx"]
    image_b64: str  # the image, base64: the channel carries JSON only
    entry: str  # the symbol to launch (lowered/mangled name)
    arch: str = ""  # sm_90a, sm_80...
    # Backend-specific launch metadata: Numba's parameter layout, Triton's warps,
    # shared memory, scratch sizes and the arguments it specialised away.
    abi: dict[str, Any] = Field(default_factory=dict)
    stage: CompileStage | None = None  # resources, PTX, SASS learned while building

    @classmethod
    def of(cls, backend: str, fmt: Literal["cubin", "ptx"], image: bytes, entry: str,
           **rest: Any) -> Artifact:  # fmt: skip
        return cls(
            backend=backend,
            format=fmt,
            image_b64=base64.b64encode(image).decode(),
            entry=entry,
            **rest,
        )

    def image(self) -> bytes:
        return base64.b64decode(self.image_b64)
