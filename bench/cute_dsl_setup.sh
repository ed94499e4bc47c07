#!/usr/bin/env bash
# Install what bench/cute_dsl_pack.sh fetched, on the GPU machine (no internet): unpack the
# CuTe DSL and cuda-python 12.9 (repacked .tar.xz and plain wheels) into DIR (no pip, no venv, so the Python that
# has torch is the one that runs the benchmark), and write DIR/env.sh, which puts DIR and
# the DSL's python_packages (what the wheel's .pth would add) first on PYTHONPATH.
#
#   bench/cute_dsl_setup.sh .dsl /tmp/cutedsl
#   . /tmp/cutedsl/env.sh && python bench/cute_dsl_gemm.py
set -euo pipefail
src=${1:?usage: cute_dsl_setup.sh SRC DIR}
dir=${2:?usage: cute_dsl_setup.sh SRC DIR}
py=${PYTHON:-python3}
(cd "$src" && sha256sum -c --quiet SHA256SUMS)
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
for whl in "$src"/*.whl; do
    "$py" -m zipfile -e "$whl" "$dir"
done
for txz in "$src"/*.tar.xz; do
    tar -C "$dir" -xJf "$txz"
done
cat > "$dir/env.sh" <<ENV
export PYTHONPATH="$dir:$dir/nvidia_cutlass_dsl/python_packages\${PYTHONPATH:+:\$PYTHONPATH}"
ENV
PYTHONPATH="$dir:$dir/nvidia_cutlass_dsl/python_packages${PYTHONPATH:+:$PYTHONPATH}" "$py" -c '
import cuda.bindings, cutlass, cutlass.cute
print("CuTe DSL from", cutlass.__file__, "cuda-bindings", cuda.bindings.__version__)'
