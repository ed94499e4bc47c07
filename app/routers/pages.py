"""The book's pages: the table of contents and the chapters.

A chapter lives at `/book/p<part>/<slug>`. The addresses it had before parts were folders,
`/book/<slug>`, answer with a permanent redirect to it, as does a part that is no longer the
chapter's: the slug is the chapter's lasting name, so the mapping is read off the book.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from kplay.app.book import Chapter
from kplay.app.contexts import ApiDocsPage
from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.render import error_page, render
from kplay.app.services import views
from kplay.app.services.apidocs import reference
from kplay.app.services.progress import reader_progress

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, services: ServicesDep, runs: RunsDep, user: UserDep) -> Response:
    # Each cell's state for this reader, from one query for the whole page.
    progress = reader_progress(runs.db, services.catalog, user)
    page = views.toc_page(services.book)
    return render(
        request, services, "index.html", page=page, progress=progress, catalog=services.catalog
    )


def _moved(request: Request, chapter: Chapter) -> Response:
    query = f"?{request.url.query}" if request.url.query else ""
    return RedirectResponse(chapter.url + query, status_code=301)


def _missing(request: Request, services: ServicesDep, slug: str) -> Response:
    return error_page(request, services, 404, f"There is no chapter called {slug!r}.")


@router.get("/book/{part}/{slug}", response_class=HTMLResponse)
def chapter(
    part: str, slug: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    try:
        found = services.book.chapter(slug)
    except KeyError:
        return _missing(request, services, slug)
    if found.part_dir != part:
        return _moved(request, found)
    page = views.chapter_page(services.book, runs, slug, user)
    return render(request, services, "chapter.html", page=page)


@router.get("/book/{slug}", response_class=HTMLResponse)
def old_chapter_address(slug: str, request: Request, services: ServicesDep) -> Response:
    try:
        return _moved(request, services.book.chapter(slug))
    except KeyError:
        return _missing(request, services, slug)


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request, services: ServicesDep) -> Response:
    spec = request.app.openapi()
    page = ApiDocsPage(
        title="Kernel Playground API",
        openapi_version=str(spec.get("openapi", "")),
        endpoints=reference(spec),
    )
    return render(request, services, "api_docs.html", page=page)


@router.get("/healthz")
def healthz() -> dict[str, str]:
    return {"status": "ok"}
