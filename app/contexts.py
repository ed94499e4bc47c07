"""Typed page contexts: every template receives one of these as `page` (or `card`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kplay.app.book import CellSpec, Chapter, Part
from kplay.app.services.apidocs import EndpointDoc
from kplay.app.services.cards import RunCard
from kplay.app.services.history import Attempt
from kplay.app.services.problems import BackendOffer


@dataclass(frozen=True)
class HistoryView:
    cell: str
    attempts: list[Attempt]
    total: int


@dataclass(frozen=True)
class CellView:
    spec: CellSpec
    problem_title: str
    problem_summary: str
    offers: list[BackendOffer]
    card: RunCard | None
    history: HistoryView
    hints: list[str] = field(default_factory=list)
    # (queue slug, name) of GPU models a run may be sent to; empty unless two or more are up.
    devices: list[tuple[str, str]] = field(default_factory=list)
    # Where the reader stands in an exercise of another kind (app.services.exercisekinds).
    exercise_state: Any = None

    @property
    def data(self) -> dict[str, Any]:
        """What playground.js needs, embedded in the page as JSON (no extra request)."""
        return {
            "cell": self.spec.id,
            "problem": self.spec.problem,
            "backend": self.spec.backend,
            "backends": [
                {
                    "key": o.key,
                    "title": o.title,
                    "language": o.language,
                    "starter": o.starter,
                    "launch": o.launch,
                }
                for o in self.offers
            ],
        }


@dataclass(frozen=True)
class TocPage:
    title: str
    parts: list[Part]


@dataclass(frozen=True)
class ChapterPage:
    title: str
    chapter: Chapter
    previous: Chapter | None
    next: Chapter | None
    segments: list[str | CellView] = field(default_factory=list)


@dataclass(frozen=True)
class ApiDocsPage:
    title: str
    openapi_version: str
    endpoints: list[EndpointDoc]


@dataclass(frozen=True)
class ErrorPage:
    title: str
    status: int
    message: str
