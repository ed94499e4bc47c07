#!/usr/bin/env bash
# Part IV's GPU measurements and the kernel-stamp timer's check, in one call on an H100/H200
# host without an index, each step bounded so that the rest still runs:
#   cutlass  bench/cutlass_builder.py (compiled in the background from the start, then run)
#   fp8      bench/fp8_sweep.py, 4096^3, the Triton FP8 variants beside torch._scaled_mm
#   dsl      bench/cute_dsl_gemm.py --big (the CuTe DSL GEMM beside cuBLAS)
#   ladder   bench/hopper_ladder.py --rungs h8 (4096^3 and 8192^3, cuBLAS in the same run)
#   fp8run   bench/problem_runs.py --problems gemm_fp8 (the engine's time, for the tiers)
#   stamps   tests/kernels/test_cuptitime_gpu.py, then bench/timing_fidelity.py with
#            KPLAY_GPU_TIMER=kernels (engine against Nsight Compute on short kernels)
# Usage: bench/part4_session.sh OUTDIR [steps...]   (default: every step above)
#
# What it reads, each made on a machine with an index and carried along:
#   .cutl/cutl_headers.tar.xz  CUTLASS's include folders, from the nvidia-cutlass wheel:
#       tar -cf - -C cutlass_library/source include tools/util/include | xz -9
#   .dsl/                      bench/cute_dsl_pack.sh .dsl
#   .whl/*.whl                 pydantic, pydantic-core, pydantic-settings, python-dotenv,
#       typing-inspection, annotated-types, platformdirs, cachetools, ml-dtypes (the
#       engine's imports the host lacks) and, for `stamps`, cupti-python
# The repository's kplay/ gets links to its sibling folders (the package layout), so the
# engine imports without being installed.
set -uo pipefail
OUT=${1:?usage: part4_session.sh OUTDIR [steps...]}; shift
STEPS=${*:-cutlass fp8 dsl ladder fp8run stamps}
mkdir -p "$OUT"
export PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 KPLAY_CACHE_DIR=/tmp/kplay-cache
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
T0=$(date +%s)
step() { echo "=== $1 at $(($(date +%s) - T0)) s"; }
has() { [[ " $STEPS " == *" $1 "* ]]; }
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
for d in app kernels workers; do [ -e kplay/$d ] || ln -s ../$d kplay/$d; done
[ -e kplay/results ] || ln -s ../bench/results kplay/results
if has cutlass; then
  mkdir -p /tmp/cutl && tar -C /tmp/cutl -xJf .cutl/cutl_headers.tar.xz
  step cutlass-compile
  (nice -n 10 timeout 560 python3 bench/cutlass_builder.py --compile-only --jobs 10 \
     --cutlass-include /tmp/cutl/include > "$OUT/cutlass_compile.log" 2>&1) &
  BUILD=$!
fi
if has fp8; then
  step fp8
  timeout 170 python3 bench/fp8_sweep.py --size 4096 --rep-ms 100 --json "$OUT/fp8_sweep.json"
fi
if has dsl; then
  step dsl
  (bash bench/cute_dsl_setup.sh .dsl /tmp/cutedsl && . /tmp/cutedsl/env.sh \
     && timeout 150 python3 bench/cute_dsl_gemm.py --big \
     && cp bench/results/cute_dsl_gemm_*.json "$OUT/")
fi
if has ladder; then
  step ladder
  timeout 240 python3 bench/hopper_ladder.py --rungs h8 --sizes 4096,8192 \
    --json "$OUT/hopper_ladder_h8.json"
fi
if has fp8run; then
  step fp8run
  timeout 120 python3 bench/problem_runs.py --problems gemm_fp8 --backends triton \
    --json-out "$OUT/problem_runs_gemm_fp8.json"
fi
if has cutlass; then
  step cutlass-wait
  wait "$BUILD"
  tail -3 "$OUT/cutlass_compile.log"
  step cutlass
  timeout 150 python3 bench/cutlass_builder.py --cutlass-include /tmp/cutl/include \
    --out "$OUT/cutlass_builder.json"
fi
if has stamps; then
  step stamps
  timeout 120 python3 -m pytest -q -p no:cacheprovider -o addopts= --noconftest \
    tests/kernels/test_cuptitime_gpu.py
  KPLAY_GPU_TIMER=kernels timeout 300 python3 bench/timing_fidelity.py --no-spread \
    | tee "$OUT/timing_fidelity_kernels.md"
fi
tar -czf "$OUT/ceilings.tgz" -C /tmp/kplay-cache ceilings 2>/dev/null
step done
