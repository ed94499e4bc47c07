#!/usr/bin/env bash
# Fetch what bench/cute_dsl_gemm.py needs on a GPU machine without internet (Python 3.12,
# x86_64, torch already there) into DEST: the nvidia-cutlass-dsl 4.2.0 wheel unpacked and
# repacked as a .tar.xz (the 62 MB wheel is zip-deflated; xz brings it well under), and the
# cuda-python / cuda-bindings 12.9 wheels (with cuda-pathfinder) that the DSL imports.
# bench/cute_dsl_setup.sh DEST installs them there.
#
#   bench/cute_dsl_pack.sh .dsl        # then carry .dsl to the GPU machine
set -euo pipefail
dest=${1:?usage: cute_dsl_pack.sh DEST}
py=${PYTHON:-python3}
mkdir -p "$dest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pick=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64
      --platform manylinux2014_x86_64)
"$py" -m pip download -q "${pick[@]}" -d "$work" nvidia-cutlass-dsl==4.2.0
"$py" -m pip download -q "${pick[@]}" -d "$dest" \
    "cuda-python==12.9.*" "cuda-bindings==12.9.*" "cuda-pathfinder>=1.1,<2"
mkdir "$work/tree"
"$py" -m zipfile -e "$work"/nvidia_cutlass_dsl-4.2.0-*.whl "$work/tree"
tar -C "$work/tree" -cf - . | xz -T0 -9 > "$dest/nvidia_cutlass_dsl-4.2.0-cp312.tar.xz"
(cd "$dest" && sha256sum ./*.whl ./*.tar.xz > SHA256SUMS)
du -ch "$dest"/* | tail -1
ls -la "$dest"
