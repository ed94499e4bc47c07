"""Rate limits on starting runs, per reader and per client address (slowapi).

Two limits, from the settings, count every run start, from a page or from the JSON API, in
one budget per key: `run_rate_per_reader` keyed by the reader's session, `run_rate_per_ip`
keyed by the client's address (what uvicorn reports, behind a proxy only when it is trusted
to name the client: see uvicorn's --forwarded-allow-ips). The per-address limit is the one
that holds for a client that throws its cookie away and so is a new reader on every call.

Each app has its own limiter (its settings, its counters), applied by the `limit_run_starts`
dependency. A start over a limit is answered 429 with a sentence that says which limit and
when to try again, and a Retry-After header.
"""

from __future__ import annotations

import math
import time

from fastapi import FastAPI, Request
from slowapi import Limiter
from slowapi.errors import RateLimitExceeded
from slowapi.util import get_remote_address

from kplay.app.readers import ReaderSessions
from kplay.config import Settings

PER_READER = "run-starts-per-reader"
PER_ADDRESS = "run-starts-per-address"
WHO = {PER_READER: "from this browser session", PER_ADDRESS: "from this address"}


class RunStartLimits:
    """The limiter of one app, with the check that run-starting endpoints depend on."""

    def __init__(self, settings: Settings, readers: ReaderSessions) -> None:
        self.limiter = Limiter(
            key_func=get_remote_address,
            storage_uri=settings.rate_limit_storage,
            strategy="moving-window",
            key_prefix=f"{settings.key_prefix}:rate",
            key_style="endpoint",
        )
        # slowapi also reads RATELIMIT_* variables (and a .env file); what it is given above
        # wins over them, and they cannot switch the limits off.
        self.limiter.enabled = True

        def reader_key(request: Request) -> str:
            return readers.current(request)

        # One decorated function per app: slowapi keeps the limits on the limiter that
        # decorates, so two apps in one process (tests) never share counters.
        @self.limiter.shared_limit(settings.run_rate_per_ip, scope=PER_ADDRESS)
        @self.limiter.shared_limit(
            settings.run_rate_per_reader, scope=PER_READER, key_func=reader_key
        )
        def start_run(request: Request) -> None:
            return None

        self._check = start_run

    def check(self, request: Request) -> None:
        """Count one run start; raises RateLimitExceeded (a 429) when a limit is spent."""
        self._check(request=request)

    def retry_after_s(self, request: Request) -> int:
        """Seconds until the limit that refused this request lets one more start through."""
        spent = getattr(request.state, "view_rate_limit", None)
        if not spent:
            return 1
        item, keys = spent
        reset_at, _remaining = self.limiter.limiter.get_window_stats(item, *keys)
        return max(1, math.ceil(reset_at - time.time()))


def limit_run_starts(request: Request) -> None:
    """FastAPI dependency of every endpoint that starts a run."""
    limits: RunStartLimits = request.app.state.run_limits
    limits.check(request)


def refusal(request: Request, exc: RateLimitExceeded) -> tuple[str, dict[str, str]]:
    """The sentence and headers of a 429 for `exc`."""
    limits: RunStartLimits = request.app.state.run_limits
    wait = limits.retry_after_s(request)
    scope = exc.limit.scope if exc.limit is not None else ""
    who = WHO.get(scope, "here")
    message = f"too many runs started {who}: {exc.detail} allowed; try again in {wait} s"
    return message, {"Retry-After": str(wait)}


def install(app: FastAPI, settings: Settings, readers: ReaderSessions) -> RunStartLimits:
    limits = RunStartLimits(settings, readers)
    app.state.run_limits = limits
    return limits
