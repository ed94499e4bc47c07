"""A PyTorch reference: a `torch.nn.Module` or a function of torch tensors, made into the
`reference(inputs, params) -> dict` the engine calls.

reference.py may define, instead of a NumPy `reference(inputs, params)`:

- `class Model(torch.nn.Module)` (the shape GPU MODE and KernelBench problems use), or
  `reference = SomeModule` / an instance of one. The class is built with the case params
  its `__init__` names (`Model(rows=..., cols=...)`), and its `forward` is called with the
  problem's `in`, `inout` and `scalar` arguments in kernel order. A module that holds
  parameters or buffers is refused: the kernel receives only the problem's arguments, so
  weights are declared as inputs and passed to `forward`.
- a function of tensors marked with `@torch_reference`: called the same way, with the
  case params its signature names as keyword arguments.

Either returns a tensor, a tuple of tensors (the outputs in the order problem.toml
declares them) or a dict by name. Like every reference, it computes in float64: float
inputs arrive as float64 tensors. Integer results are converted to the declared type when
every value fits it (torch has few uint32 operations; a histogram may count in int64).
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

import numpy as np

from kplay.kernels import dtypes
from kplay.kernels.draws import array_module, on_device

MARK = "__kplay_torch_reference__"


class TorchReferenceError(ValueError):
    def __init__(self, field: str | None, message: str) -> None:
        self.field = field
        super().__init__(message)


def torch_reference(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark `fn` as a reference written with torch tensors (see the module's docstring)."""
    setattr(fn, MARK, True)
    return fn


def _target(module: ModuleType) -> Any:
    """The torch object reference.py offers as its reference, or None."""
    torch = sys.modules.get("torch")
    candidates = [getattr(module, "reference", None), getattr(module, "Model", None)]
    for obj in candidates:
        if obj is None:
            continue
        if callable(obj) and getattr(obj, MARK, False):
            return obj
        if torch is None:
            continue
        base = torch.nn.Module
        if isinstance(obj, base) or (isinstance(obj, type) and issubclass(obj, base)):
            return obj
    return None


def adapt(module: ModuleType, problem: Any) -> None:
    """Replace a torch reference in `module` with the engine's calling convention."""
    target = _target(module)
    if target is None:
        return
    if getattr(module, "reference", None) is not None and getattr(module, "Model", None):
        if target is not module.reference:
            raise TorchReferenceError(
                "Model", "reference.py defines both reference and Model; keep one of the two"
            )
    module.reference = TorchReference(target, problem)  # type: ignore[attr-defined]


class TorchReference:
    """Calls a torch module or function on a case's inputs; returns NumPy (or CuPy) arrays."""

    def __init__(self, target: Any, problem: Any) -> None:
        self.target = target
        self.problem = problem

    def __call__(self, inputs: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
        import torch

        xp = array_module(*[v for v in inputs.values() if hasattr(v, "dtype")])
        args = [
            _tensor(torch, inputs[a.name], a.dtype) if a.is_array else inputs[a.name]
            for a in self.problem.args
            if a.role in ("in", "inout", "scalar")
        ]
        fn = self._callable(params)
        with torch.no_grad():
            result = fn(*args, **self._kwargs(fn, params))
        outputs = self.problem.outputs
        if isinstance(result, torch.Tensor):
            result = (result,)
        if isinstance(result, dict):
            named = dict(result)
        else:
            named = {a.name: r for a, r in zip(outputs, result, strict=False)}
            if len(result) != len(outputs):
                named["(extra or missing)"] = len(result)
        out = {}
        for name, value in named.items():
            if not isinstance(value, torch.Tensor):
                out[name] = value
                continue
            declared = next((a.dtype for a in outputs if a.name == name), None)
            out[name] = _array(value, declared, xp)
        return out

    def _callable(self, params: dict[str, Any]) -> Callable[..., Any]:
        import torch

        target = self.target
        if isinstance(target, type):
            target = target(**_named(target.__init__, params, skip_self=True))
        if isinstance(target, torch.nn.Module):
            held = [n for n, _ in target.named_parameters()] + [
                n for n, _ in target.named_buffers()
            ]
            if held:
                raise TorchReferenceError(
                    "Model",
                    f"the reference module holds parameters or buffers ({', '.join(held[:4])}); "
                    "the kernel gets only the problem's arguments, so declare the weights as "
                    "inputs in problem.toml and pass them to forward()",
                )
            return target.forward
        return target

    def _kwargs(self, fn: Callable[..., Any], params: dict[str, Any]) -> dict[str, Any]:
        if isinstance(self.target, type) or hasattr(self.target, "forward"):
            return {}  # a module gets its params in __init__
        return _named(fn, params)


def _named(fn: Callable[..., Any], params: dict[str, Any], skip_self: bool = False) -> dict:
    try:
        names = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return {}
    if skip_self and names and names[0] == "self":
        names = names[1:]
    return {k: v for k, v in params.items() if k in names}


def _tensor(torch: Any, arr: Any, declared: str) -> Any:
    """A torch tensor of a case's input: floats as float64, packed types as their bytes,
    unsigned types wider than a byte as int64 (torch computes little in them)."""
    info = dtypes.get(declared)
    if on_device(arr):
        if info.extension:
            raise TorchReferenceError(None, f"{declared} inputs on the GPU: draw them on the host")
        tensor = torch.from_dlpack(arr)
    else:
        host = np.ascontiguousarray(arr)
        if info.float_values and info.kind != "packed":
            host = host.astype(np.float64)
        elif info.kind == "int" and host.dtype.kind == "u" and host.dtype.itemsize > 1:
            host = host.astype(np.int64)
        tensor = torch.from_numpy(host)
    if info.float_values and info.kind != "packed":
        return tensor.to(torch.float64)
    return tensor


def _array(tensor: Any, declared: str | None, xp: Any) -> Any:
    tensor = tensor.detach()
    if xp is not np:
        import cupy

        arr = cupy.from_dlpack(tensor.contiguous())
    else:
        arr = tensor.cpu().numpy()
    if declared is None:
        return arr
    info = dtypes.get(declared)
    if info.kind in ("int", "packed") and arr.dtype.kind in "iu" and arr.dtype != info.storage:
        limits = np.iinfo(info.storage)
        if arr.size == 0 or (int(arr.min()) >= limits.min and int(arr.max()) <= limits.max):
            return arr.astype(info.storage)
    return arr
