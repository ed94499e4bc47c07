"""Search: the results page at /search and the same results as JSON at /api/v1/search."""

from __future__ import annotations

import threading
from typing import Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from pydantic import BaseModel, Field

from kplay.app.deps import ServicesDep
from kplay.app.render import render
from kplay.app.schemas import ErrorOut
from kplay.app.services.search import (
    MAX_QUERY_CHARS,
    Hit,
    QueryError,
    SearchIndex,
    SearchPage,
    SearchResults,
)

router = APIRouter()
_LOCK = threading.Lock()
# No bound here: a query longer than the service takes is refused with its own message.
_Q = Query(default="", description=f"the words to look for, at most {MAX_QUERY_CHARS} characters")


class SearchHitOut(BaseModel):
    kind: str = Field(description="section (of a chapter) or problem (of the catalog)")
    title: str = Field(description="the section's heading or the problem's title")
    title_html: str = Field(description="the title, HTML-escaped, matches in <mark>")
    chapter: str = Field(description="the chapter it is in (a problem: that embeds it), or ''")
    part: str
    url: str | None = Field(description="the section's anchor or the problem's cell, if any")
    snippet: str = Field(description="a short extract around the matches, plain text")
    snippet_html: str = Field(description="the extract, HTML-escaped, matches in <mark>")


class SearchOut(BaseModel):
    query: str
    terms: list[str] = Field(description="the words searched for, as the query was read")
    every_word: bool = Field(description="false when no entry had every word")
    message: str | None = None
    sections: list[SearchHitOut]
    problems: list[SearchHitOut]


def search_index(request: Request, services: ServicesDep) -> SearchIndex:
    """The app's index, made on first use for the database the app runs on now."""
    state = request.app.state
    with _LOCK:
        found: SearchIndex | None = getattr(state, "search_index", None)
        engine = services.db.engine if services.db is not None else None
        if found is None or found.engine is not engine:
            found = state.search_index = SearchIndex(services.book, services.catalog, engine)
        return found


def _hit_out(hit: Hit) -> dict[str, Any]:
    return {**vars(hit), "title_html": str(hit.title_html), "snippet_html": str(hit.snippet_html)}


def _out(results: SearchResults) -> dict[str, Any]:
    return {
        "query": results.query,
        "terms": list(results.terms),
        "every_word": results.every_word,
        "message": results.message,
        "sections": [_hit_out(h) for h in results.sections],
        "problems": [_hit_out(h) for h in results.problems],
    }


@router.get("/search", response_class=HTMLResponse, include_in_schema=False)
def search_page(request: Request, services: ServicesDep, q: str = _Q) -> Response:
    status, results, message = 200, None, None
    if q.strip():
        try:
            results = search_index(request, services).search(q)
        except QueryError as exc:
            status, message = 400, str(exc)
    page = SearchPage(
        title=f"Search: {q.strip()}" if results else "Search",
        query=q.strip()[:MAX_QUERY_CHARS],
        results=results,
        message=message or (results.message if results else None),
    )
    return render(request, services, "search.html", status_code=status, page=page)


@router.get(
    "/api/v1/search",
    tags=["api"],
    response_model=SearchOut,
    responses={400: {"model": ErrorOut, "description": "an empty or too long query"}},
    summary="Search the book's sections and the problem catalog",
)
def search_api(request: Request, services: ServicesDep, q: str = _Q) -> Any:
    try:
        results = search_index(request, services).search(q)
    except QueryError as exc:
        return JSONResponse({"detail": str(exc)}, status_code=400)
    return _out(results)
