"""Which GPU models a reader may pick for a run: the ones live workers serve right now."""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

from kplay.workers.executor import Executor

log = logging.getLogger(__name__)

_GENERIC = ("gpu.any",)


def gpu_models(devices: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(queue slug, display name) of each GPU model some live worker serves.

    A worker serves `gpu.<model>` queues (e.g. `gpu.h200`) besides `gpu.any` and
    `gpu.sm<cc>`; the slug is what a run's `device` field routes by.
    """
    found: dict[str, str] = {}
    for worker in devices:
        for queue in worker.get("queues") or ():
            if not queue.startswith("gpu.") or queue in _GENERIC or queue[4:6] == "sm":
                continue
            slug = queue[4:]
            found.setdefault(slug, str(worker.get("device") or slug.upper()))
    return sorted(found.items(), key=lambda item: item[1])


# Chapter pages are rendered often and the fleet changes slowly: ask the executor (a Redis
# round trip in distributed mode) at most once per TTL per executor.
TTL_S = 5.0
_cache: weakref.WeakKeyDictionary[Executor, tuple[float, list[tuple[str, str]]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def device_choices(executor: Executor) -> list[tuple[str, str]]:
    """The choices worth offering: none unless at least two GPU models are up."""
    now = time.monotonic()
    with _lock:
        hit = _cache.get(executor)
        if hit is not None and now - hit[0] < TTL_S:
            return hit[1]
    try:
        models = gpu_models(executor.devices())
    except Exception:  # noqa: BLE001 - a picker is a nicety; the broker may be away
        log.exception("could not list the devices")
        models = []
    choices = models if len(models) > 1 else []
    with _lock:
        _cache[executor] = (now, choices)
    return choices
