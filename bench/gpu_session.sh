#!/usr/bin/env bash
# One batched session on a GPU host: calibrate, GPU tests, every solution on every GPU
# backend, timing fidelity, and a full timed run of each problem's CUDA solutions.
# Usage: KPLAY_COMMIT=<hash> bench/gpu_session.sh OUTDIR [steps...]
#        (steps: calibrate tests fidelity ladder gemm part1; the device copy has no git)
set -uo pipefail
OUTDIR=${1:-/tmp/kplay-gpu}; shift || true
STEPS=${*:-calibrate tests fidelity ladder}
mkdir -p "$OUTDIR"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 KPLAY_CACHE_DIR=/tmp/kplay-cache NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  | tee "$OUTDIR/nvidia-smi.txt"
export KPLAY_COMMIT=${KPLAY_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "$KPLAY_COMMIT" | tee "$OUTDIR/commit.txt"
for step in $STEPS; do
  echo "=== $step ($(date -u +%H:%M:%S))"
  case $step in
    calibrate)
      python3 -m app.cli calibrate --kind gpu 2>&1 | tee "$OUTDIR/calibrate.txt"
      cp /tmp/kplay-cache/ceilings/*.json "$OUTDIR/" 2>/dev/null ;;
    tests)
      python3 -m pytest -q -p no:cacheprovider tests/kernels -x -rs --timeout 600 2>&1 \
        | tee "$OUTDIR/pytest-gpu.txt" | tail -40 ;;
    fidelity)
      python3 bench/timing_fidelity.py 2>&1 | tee "$OUTDIR/fidelity.md" ;;
    gemm)
      python3 bench/gemm_ladder.py 2>&1 | tee "$OUTDIR/gemm_ladder.md"
      cp bench/results/gemm_ladder.json static/book/gemm_ladder.svg "$OUTDIR/" ;;
    part1)
      python3 bench/part1.py --gpu 2>&1 | tee "$OUTDIR/part1.md"
      cp bench/results/part1.json "$OUTDIR/" 2>/dev/null ;;
    ladder)
      python3 bench/problem_runs.py --json-out "$OUTDIR/problem_runs.json" 2>&1 | tee "$OUTDIR/problem_runs.md" ;;
  esac
done
