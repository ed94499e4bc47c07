"""FastAPI dependencies as Annotated aliases; handlers name what they need and nothing more."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request
from fastapi.templating import Jinja2Templates

from kplay.app import accounts
from kplay.app.book import Book
from kplay.app.db.session import Database
from kplay.app.readers import ReaderSessions
from kplay.app.services.live import ProgressHub
from kplay.app.services.runs import RunService
from kplay.config import Settings
from kplay.kernels.problem import ProblemSpec
from kplay.workers.executor import Executor


@dataclass
class Services:
    settings: Settings
    book: Book
    catalog: Mapping[str, ProblemSpec]
    templates: Jinja2Templates
    db: Database | None = None
    executor: Executor | None = None
    runs: RunService | None = None
    # Each run's progress as it happens, for the pages that follow it (app.routers.live).
    live: ProgressHub = field(default_factory=ProgressHub)


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def get_runs(services: Annotated[Services, Depends(get_services)]) -> RunService:
    if services.runs is None:
        raise RuntimeError("the app has not started: use it inside its lifespan")
    return services.runs


def get_readers(request: Request) -> ReaderSessions:
    readers: ReaderSessions = request.app.state.readers
    return readers


def get_user(request: Request) -> str:
    # The account (API token, or signed in on the session) or else the anonymous reader: a
    # Viewer, which is the owner name runs are stored under and carries the role.
    return accounts.viewer(request)


ServicesDep = Annotated[Services, Depends(get_services)]
RunsDep = Annotated[RunService, Depends(get_runs)]
UserDep = Annotated[str, Depends(get_user)]
