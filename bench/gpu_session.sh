#!/usr/bin/env bash
# One batched session on a GPU host: calibrate, tuning sweeps, the distributed mode's
# latency and throughput, timing fidelity, the GEMM ladder, Part I's GPU figures, every
# solution through the engine, and the GPU tests.
# Usage: KPLAY_COMMIT=<hash> bench/gpu_session.sh OUTDIR [steps...]
#   TUNE_ONLY=sections limits `tune`; TESTS_K=expr limits `tests` (pytest -k);
#   LADDER_PROBLEMS=slugs limits `ladder`; STALL_SOURCE=1 adds source-level stall tables.
#   steps: calibrate tune stalls profile fleet fidelity gemm part1 ladder tests gputests boxes
#   (the device copy has no git)
# Every output goes under OUTDIR/raw and, after each step, into OUTDIR/session.tar.gz.
# Ceilings found in ./.ceilings/*.json are put in the cache first (a calibration made
# earlier on the same device), so `calibrate` can be left out of a later session.
set -uo pipefail
OUTDIR=${1:-/tmp/kplay-gpu}; shift || true
STEPS=${*:-calibrate tests fidelity ladder}
RAW="$OUTDIR/raw"
mkdir -p "$RAW"
# A host without an index: install from the wheelhouse that `deploy/wheelhouse.py build .whl
# --redis-deb` assembled (into a venv that sees the image's torch, triton and CuPy).
# Elsewhere the checkout must already be installed (`pip install -e '.[gpu,distributed]'`).
if [ -f .whl/requirements.txt ]; then
  python3 deploy/wheelhouse.py install .whl --venv /tmp/kvenv --editable . || exit 1
  . /tmp/kvenv/bin/activate
  # The test runner and its plugins, when the wheelhouse carries them (the tests' addopts
  # name pytest-xdist's -n).
  if ls .whl/pytest_xdist-*.whl >/dev/null 2>&1; then
    pip install -q --no-index --find-links .whl pytest pytest-xdist pytest-timeout
  fi
  if [ -d .whl/redis-root/usr/bin ]; then
    export PATH=$PWD/.whl/redis-root/usr/bin:$PATH
    export LD_LIBRARY_PATH=$PWD/.whl/redis-root/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
  fi
fi
python3 -c "import kplay" || { echo "kplay is not installed"; exit 1; }
export PYTHONUNBUFFERED=1 KPLAY_CACHE_DIR=/tmp/kplay-cache NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
if ls .ceilings/*.json >/dev/null 2>&1; then
  mkdir -p /tmp/kplay-cache/ceilings && cp .ceilings/*.json /tmp/kplay-cache/ceilings/
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv \
  | tee "$RAW/nvidia-smi.txt"
export KPLAY_COMMIT=${KPLAY_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "$KPLAY_COMMIT" | tee "$RAW/commit.txt"
for step in $STEPS; do
  echo "=== $step ($(date -u +%H:%M:%S))"
  case $step in
    calibrate)
      python3 -m kplay.cli calibrate --kind gpu 2>&1 | tee "$RAW/calibrate.txt"
      cp /tmp/kplay-cache/ceilings/*.json "$RAW/" 2>/dev/null ;;
    tune)
      python3 bench/tune_gpu.py --only "${TUNE_ONLY:-sgemm,wmma,mma,transpose,reduce}" \
        --json-out "$RAW/tune.json" 2>&1 | tee "$RAW/tune.txt" ;;
    stalls)
      STALL_METRICS=lts__t_bytes.sum.per_second,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
      STALL_METRICS+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
      for r in barrier branch_resolving dispatch_stall drain imc_miss lg_throttle long_scoreboard math_pipe_throttle membar \
               mio_throttle misc no_instruction not_selected selected short_scoreboard sleeping tex_throttle wait; do
        STALL_METRICS+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
      done
      # Defaults, and the fastest variant of each section when `tune` ran first.
      ncu --clock-control none -k 'regex:^(sgemm|hgemm)$' \
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
        --section ComputeWorkloadAnalysis --section Occupancy ${STALL_SOURCE:+--section SourceCounters} \
        --metrics "$STALL_METRICS" \
        python3 bench/gemm_stalls.py --from-tune "$RAW/tune.json" 2>&1 | tee "$RAW/stalls.txt" | tail -60 ;;
    profile)
      python3 bench/run_profile.py 2>&1 | tee "$RAW/profile.txt" ;;
    fleet)
      python3 bench/fleet_gpu.py --json-out "$RAW/fleet_gpu.json" 2>&1 | tee "$RAW/fleet_gpu.txt" ;;
    tests)
      python3 -m pytest -n 0 -q -p no:cacheprovider tests/kernels --maxfail=10 -rs --timeout 600 \
        ${TESTS_K:+-k "$TESTS_K"} 2>&1 \
        | tee "$RAW/pytest-gpu.txt" | tail -40 ;;
    gputests)
      python3 -m pytest -n 0 -q -p no:cacheprovider -m gpu tests/kernels tests/workers tests/app \
        tests/adversarial \
        -rs --timeout 300 ${TESTS_K:+-k "$TESTS_K"} 2>&1 | tee "$RAW/pytest-gpu-marked.txt" | tail -40 ;;
    boxes)
      python3 bench/sandbox_backends.py --repeat "${BOX_REPEAT:-10}" 2>&1 | tee "$RAW/boxes.md"
      python3 bench/box_roundtrip.py 2>&1 | tee "$RAW/box_roundtrip.md" ;;
    fidelity)
      python3 bench/timing_fidelity.py 2>&1 | tee "$RAW/fidelity.md" ;;
    gemm)
      python3 bench/gemm_ladder.py 2>&1 | tee "$RAW/gemm_ladder.md"
      cp bench/results/gemm_ladder.json static/book/gemm_ladder.svg "$RAW/" ;;
    part1)
      python3 bench/part1.py --gpu 2>&1 | tee "$RAW/part1.md"
      cp bench/results/part1*.json "$RAW/" 2>/dev/null ;;
    ladder)
      python3 bench/problem_runs.py ${LADDER_PROBLEMS:+--problems "$LADDER_PROBLEMS"} --json-out "$RAW/problem_runs.json" 2>&1 | tee "$RAW/problem_runs.md" ;;
  esac
  tar czf "$OUTDIR/session.tar.gz" -C "$RAW" .
done
