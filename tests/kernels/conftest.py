"""Kernel tests share one process, so Numba's CUDA simulator and Triton's interpreter are
switched on here, at collection, before any test can import numba.cuda or triton. On a
machine with a GPU this does nothing and the same tests run on the device.
"""

from kplay.kernels.hardware import prepare_cpu_fallbacks

prepare_cpu_fallbacks()
