# One image for every service of docker-compose.yml: the web app, GPU workers, CPU workers.
#
#   docker build -t kernel-playground .                          # GPU-capable (default)
#   docker build --build-arg EXTRAS=sim,distributed --build-arg CUDA_WHEELS= \
#                -t kernel-playground:cpu .                       # no CUDA libraries at all
#
# GPU workers need the NVIDIA Container Toolkit on the host; the driver comes from there.
FROM python:3.11-slim-bookworm

# sim: the CUDA compiler wheels (compile-only reports), Numba's simulator, Triton's
# interpreter; gpu: CuPy, NVML and GPU builds of the libraries; distributed: Celery,
# Redis and PostgreSQL clients.
ARG EXTRAS=sim,gpu,distributed
# The CUDA runtime libraries CuPy loads, as wheels, so the image needs no CUDA toolkit.
ARG CUDA_WHEELS="cupy-cuda13x[ctk]"

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KPLAY_CACHE_DIR=/var/cache/kplay

# Triton builds its launcher with the C compiler at run time.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc g++ libc6-dev \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --create-home --uid 10001 kplay \
 && install -d -o kplay -g kplay /var/cache/kplay

WORKDIR /opt/kplay
COPY --chown=kplay:kplay . .
# Editable: the book, templates and static files are read from this folder.
RUN pip install -e ".[${EXTRAS}]" \
 && if [ -n "${CUDA_WHEELS}" ]; then pip install "${CUDA_WHEELS}"; fi

USER kplay
EXPOSE 8000
CMD ["kplay", "serve", "--host", "0.0.0.0"]
