"""Inputs, reference and cuBLAS baseline for a bfloat16 GEMM with fp32 accumulation."""

from __future__ import annotations

from typing import Any

import numpy as np

from kplay.kernels.draws import Draws, array_module

# cuBLAS enum values (cublas_api.h, library_types.h): stable parts of the C ABI.
_CUDA_R_16BF = 14
_CUDA_R_32F = 0
_CUBLAS_COMPUTE_32F = 68
_CUBLAS_GEMM_DEFAULT = -1
_CUBLAS_OP_N = 0
_CUBLAS_POINTER_MODE_HOST = 0
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)


def generate(params: dict, draw: Draws) -> dict:
    m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
    # Uniform in [-1, 1], rounded to bfloat16: the kernel and the reference start from
    # the same bf16 values, so only the accumulation is judged.
    a = draw.uniform((m, k), -1.0, 1.0, dtype="bfloat16")
    b = draw.uniform((k, n), -1.0, 1.0, dtype="bfloat16")
    return {"A": a, "B": b}


def reference(inputs: dict, params: dict) -> dict:
    xp = array_module(inputs["A"])
    a = inputs["A"].astype(xp.float64)
    b = inputs["B"].astype(xp.float64)
    return {"C": xp.ascontiguousarray(a @ b).astype(xp.float32)}


def baseline(arrays: dict, params: dict, xp: Any) -> None:
    """cuBLAS GEMM with bf16 inputs, fp32 output and fp32 compute (cublasGemmEx).

    The arrays hold the bf16 bits (CuPy has no bfloat16 type); cuBLAS reads them as
    CUDA_R_16BF. cuBLAS is column-major: a row-major C = A @ B is the column-major
    C^T = B^T A^T, so B is passed first and M and N swap places.
    """
    from cupy.cuda import cublas, device

    a, b, c = arrays["A"], arrays["B"], arrays["C"]
    m, n, k = int(params["M"]), int(params["N"]), int(params["K"])
    handle = device.get_cublas_handle()
    mode = cublas.getPointerMode(handle)
    cublas.setPointerMode(handle, _CUBLAS_POINTER_MODE_HOST)
    try:
        cublas.gemmEx(
            handle, _CUBLAS_OP_N, _CUBLAS_OP_N, n, m, k,
            _ONE.ctypes.data, b.data.ptr, _CUDA_R_16BF, n,
            a.data.ptr, _CUDA_R_16BF, k,
            _ZERO.ctypes.data, c.data.ptr, _CUDA_R_32F, n,
            _CUBLAS_COMPUTE_32F, _CUBLAS_GEMM_DEFAULT,
        )  # fmt: skip
    finally:
        cublas.setPointerMode(handle, mode)
