"""The book to take away: `/downloads/book.pdf` and `/downloads/book.epub`, the current
edition as this server builds it (app.services.bookfiles).

A file that is ready downloads at once. One that is not yet built answers 202 with a page
that says so and reloads itself (and a `Retry-After` for other clients); a build that failed
answers 500 with its reason, and a server without the `book` extra 503 with what to install.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, Response

from kplay.app.deps import ServicesDep
from kplay.app.render import error_page, render
from kplay.app.services.bookfiles import FORMATS, BookFiles

router = APIRouter(include_in_schema=False)
RETRY_S = 5


def book_files(request: Request, services: ServicesDep) -> BookFiles:
    """The app's one BookFiles, made on first use from its settings."""
    found = getattr(request.app.state, "book_files", None)
    if found is None:
        settings = services.settings
        found = BookFiles(
            settings.cache_root() / "book-files", settings.book_dir, settings.results_dir
        )
        request.app.state.book_files = found
    return found


@router.get("/downloads/book.{fmt}", response_class=HTMLResponse)
def download(fmt: str, request: Request, services: ServicesDep) -> Response:
    if fmt not in FORMATS:
        return error_page(
            request, services, 404, f"The book is offered as PDF and EPUB, not as {fmt!r}."
        )
    playground = str(request.base_url).rstrip("/")
    status = book_files(request, services).status(fmt, playground)  # type: ignore[arg-type]
    if status.state == "ready" and status.path is not None:
        return FileResponse(
            status.path,
            media_type=FORMATS[fmt][1],
            filename=f"writing-kernels-with-ai.{fmt}",
        )
    if status.state == "unavailable":
        return error_page(request, services, 503, status.message)
    if status.state == "failed":
        return error_page(request, services, 500, status.message)
    response = render(
        request,
        services,
        "book_building.html",
        status_code=202,
        page={"title": f"The {fmt.upper()} is being built", "fmt": fmt, "retry": RETRY_S},
    )
    response.headers["Retry-After"] = str(RETRY_S)
    return response
