#!/usr/bin/env bash
# Fetch what bench/cute_dsl_gemm.py needs on a GPU machine without internet (Python 3.12,
# x86_64, torch already there) into DEST: the nvidia-cutlass-dsl 4.2.0 wheel and the
# cuda-bindings 12.9 wheel the DSL imports, each unpacked and repacked as a .tar.xz (zip
# deflate leaves them at 62 + 7.6 MB, xz at about 43 + 4, so that DEST and the tree fit the
# 64 MiB a GPU run may carry), and the small pure-Python cuda-python and cuda-pathfinder
# wheels as they are. bench/cute_dsl_setup.sh DEST DIR installs them. xz -9 of the DSL takes
# minutes.
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
"$py" -m pip download -q "${pick[@]}" -d "$work" nvidia-cutlass-dsl==4.2.0 "cuda-bindings==12.9.*"
"$py" -m pip download -q "${pick[@]}" -d "$dest" "cuda-python==12.9.*" "cuda-pathfinder>=1.1,<2"
for whl in "$work"/*.whl; do
    name=$(basename "$whl" | cut -d- -f1-2)  # e.g. nvidia_cutlass_dsl-4.2.0
    mkdir "$work/tree"
    "$py" -m zipfile -e "$whl" "$work/tree"
    tar -C "$work/tree" -cf - . | xz -T0 -9 > "$dest/$name-cp312.tar.xz"
    rm -rf "$work/tree"
done
(cd "$dest" && sha256sum ./*.whl ./*.tar.xz > SHA256SUMS)
du -ch "$dest"/* | tail -1
ls -la "$dest"
