# One image for every service of docker-compose.yml: the web app, GPU workers, CPU workers.
#
#   docker build -t kernel-playground .                          # GPU-capable (default)
#   docker build --build-arg EXTRAS=sim,distributed --build-arg CUDA_WHEELS= \
#                --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cpu \
#                -t kernel-playground:cpu .                       # no CUDA libraries at all
#
# The image installs the project's wheel, not the checkout: the book, templates, static
# files and problems are package data inside it. GPU workers need the NVIDIA Container
# Toolkit on the host; the driver comes from there.

FROM python:3.11-slim-bookworm AS wheel
WORKDIR /src
COPY . .
RUN pip wheel --no-deps --no-cache-dir -w /dist .

FROM python:3.11-slim-bookworm

# sim: the CUDA compiler wheels (compile-only reports), Numba's simulator, Triton's
# interpreter; gpu: CuPy, NVML and GPU builds of the libraries; distributed: Celery,
# Redis and PostgreSQL clients.
ARG EXTRAS=sim,gpu,distributed
# The CUDA runtime libraries CuPy loads, as wheels, so the image needs no CUDA toolkit.
ARG CUDA_WHEELS="cupy-cuda13x[ctk]"
# Optional: an index to take torch from first, e.g. PyTorch's CPU-only builds (much smaller)
# for an image without GPUs. Empty: torch comes from the default index with the extras.
ARG TORCH_INDEX=""

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KPLAY_CACHE_DIR=/var/cache/kplay

# Triton builds its launcher with the C compiler at run time; bubblewrap and libseccomp are
# the evaluation sandbox (it needs a seccomp profile that allows user namespaces: see
# docs/deployment.md).
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc g++ libc6-dev bubblewrap libseccomp2 \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 kplay \
 && install -d -o kplay -g kplay /var/cache/kplay

COPY --from=wheel /dist /dist
RUN if [ -n "${TORCH_INDEX}" ]; then pip install torch==2.13.0 --index-url "${TORCH_INDEX}"; fi \
 && pip install "$(ls /dist/kernel_playground-*.whl)[${EXTRAS}]" \
 && if [ -n "${CUDA_WHEELS}" ]; then pip install "${CUDA_WHEELS}"; fi \
 && rm -rf /dist

USER kplay
WORKDIR /home/kplay
EXPOSE 8000
CMD ["kplay", "serve", "--host", "0.0.0.0"]
