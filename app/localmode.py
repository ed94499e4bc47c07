"""Trusted local mode: where learner code runs without the sandbox, only this machine may
start runs.

An executor whose evaluation children are not sandboxed (no bubblewrap, user namespaces
switched off, `KPLAY_SANDBOX=off`: `SandboxStatus.trusted_local_only`) runs learner code as
a plain process of the server's user, able to read that user's files and open connections.
Such a server is a tool for its own user. The app then

- says so at start (a warning in the log, and `kplay serve` prints it);
- refuses every run start whose client is not a loopback address (127.0.0.0/8, ::1), or
  that came through a proxy header naming any other address: 403, `LOCAL_ONLY`;
- shows a "trusted local mode" note on every page (base.html).

Reading chapters stays open to everyone. The embedded executor reports its pool's status
(`LocalExecutor.sandbox`); in the distributed mode each worker reports its own in its fleet
registration (`WorkerInfo.sandbox`), and one unsandboxed live worker is enough.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import threading
import time
from typing import Any

from fastapi import Request

from kplay.app.executors import FleetAware
from kplay.workers.executor import Executor
from kplay.workers.sandbox import SandboxStatus

log = logging.getLogger(__name__)

LOCAL_ONLY = (
    "This server runs learner code without a sandbox (trusted local mode), so it accepts "
    "runs only from this machine; reading the chapters stays open."
)

# Headers by which a proxy names the client it forwards for. Present, they must name
# loopback addresses only: a local proxy in front of the server forwards other machines.
PROXY_HEADERS = (
    "forwarded",
    "x-forwarded-for",
    "x-real-ip",
    "x-client-ip",
    "x-cluster-client-ip",
    "true-client-ip",
    "cf-connecting-ip",
    "fastly-client-ip",
)
_FORWARDED_FOR = re.compile(r'(?:^|[;,\s])for\s*=\s*("[^"]*"|[^;,\s]*)', re.I)

# How long the fleet's answer is kept, so that pages and run starts do not each ask Redis.
FLEET_TTL_S = 5.0


class LocalRunsOnly(Exception):
    """A run start refused in trusted local mode (answered 403, `LOCAL_ONLY`)."""


def is_loopback(address: str | None) -> bool:
    """127.0.0.0/8, ::1 and IPv4-mapped 127.x; anything unparsable is not."""
    if not address:
        return False
    text = address.strip().strip('"')
    if text.startswith("[") and "]" in text:  # [::1]:8000, as Forwarded writes IPv6
        text = text[1 : text.index("]")]
    elif text.count(":") == 1:  # 127.0.0.1:8000
        text = text.split(":", 1)[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def forwarded_addresses(request: Request) -> list[str]:
    """Every client address a proxy header of the request names."""
    found: list[str] = []
    for name in PROXY_HEADERS:
        for value in request.headers.getlist(name):
            if name == "forwarded":
                parts = [m.group(1) for m in _FORWARDED_FOR.finditer(value)]
                # A Forwarded header that names no client ("by=..." only) still says a
                # proxy stands in between: counted as a non-loopback claim.
                found += parts or [value]
            else:
                found += [p for p in (s.strip() for s in value.split(",")) if p] or [value]
    return found


def from_this_machine(request: Request) -> bool:
    """The client is loopback, and no proxy header says it forwards another address."""
    client = request.client.host if request.client else None
    if not is_loopback(client):
        return False
    return all(is_loopback(a) for a in forwarded_addresses(request))


class LocalMode:
    """Whether the executor's children run outside the sandbox, and why."""

    def __init__(self, executor: Executor, fleet_ttl_s: float = FLEET_TTL_S) -> None:
        self.executor = executor
        self.fleet_ttl_s = fleet_ttl_s
        self._lock = threading.Lock()
        self._fleet: tuple[float, str | None] | None = None

    def reason(self) -> str | None:
        """Why runs are limited to this machine (the sandbox's own words), or None."""
        status = _reported_status(self.executor)
        if status is not None:
            return status.summary() if status.trusted_local_only else None
        if isinstance(self.executor, FleetAware):
            return self._fleet_reason()
        return None

    @property
    def active(self) -> bool:
        return self.reason() is not None

    def announcement(self) -> str | None:
        """The line said at start: trusted local mode, or the sandbox that is there."""
        reason = self.reason()
        if reason is not None:
            return (
                f"TRUSTED LOCAL MODE: {reason}. Runs are accepted only from this machine "
                "(127.0.0.0/8, ::1); set KPLAY_SANDBOX=required on a server that takes code "
                "from others."
            )
        status = _reported_status(self.executor)
        return status.summary() if status is not None else None

    def check(self, request: Request) -> None:
        """Raises LocalRunsOnly for a run start from elsewhere in trusted local mode."""
        if self.active and not from_this_machine(request):
            raise LocalRunsOnly(LOCAL_ONLY)

    def _fleet_reason(self) -> str | None:
        now = time.monotonic()
        with self._lock:
            if self._fleet is not None and now - self._fleet[0] < self.fleet_ttl_s:
                return self._fleet[1]
            before = self._fleet[1] if self._fleet is not None else None
        try:
            reason = _fleet_reason(self.executor)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - the registry may be away: keep what was known
            log.debug("fleet registry unreadable for the sandbox check: %s", exc)
            reason = before
        with self._lock:
            self._fleet = (now, reason)
        if reason != before and reason is not None:
            log.warning("trusted local mode: %s; runs only from this machine", reason)
        elif reason != before:
            log.info("every live worker's evaluation children are sandboxed again")
        return reason


def _reported_status(executor: Executor) -> SandboxStatus | None:
    """The executor's own pool status (the embedded mode), None where it has none.

    None also before the pool started: the app starts its executor before it serves.
    """
    try:
        status: Any = executor.sandbox  # type: ignore[attr-defined]
    except AttributeError:
        return None
    return status if isinstance(status, SandboxStatus) else None


def _fleet_reason(executor: FleetAware) -> str | None:
    """The first live worker whose children are not sandboxed, in words."""
    for worker in executor.fleet_snapshot().workers:
        if worker.sandbox is None:
            continue  # a worker too old to report its sandbox
        status = SandboxStatus.model_validate(worker.sandbox)
        if status.trusted_local_only:
            return f"worker {worker.id}: {status.summary()}"
    return None


def local_runs_only(request: Request) -> None:
    """FastAPI dependency of every endpoint that starts a run (before the rate limits)."""
    mode: LocalMode | None = getattr(request.app.state, "local_mode", None)
    if mode is not None:
        mode.check(request)


def banner(request: Request) -> dict[str, Any]:
    """Template context of every page: `trusted_local`, the reason, or None."""
    mode: LocalMode | None = getattr(request.app.state, "local_mode", None)
    return {"trusted_local": mode.reason() if mode is not None else None}
