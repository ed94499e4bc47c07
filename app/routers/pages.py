"""The book's pages: the table of contents and the chapters."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.contexts import ApiDocsPage
from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.render import error_page, render
from kplay.app.services import views
from kplay.app.services.apidocs import reference

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def index(request: Request, services: ServicesDep) -> Response:
    return render(request, services, "index.html", page=views.toc_page(services.book))


@router.get("/book/{slug}", response_class=HTMLResponse)
def chapter(
    slug: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    try:
        page = views.chapter_page(services.book, runs, slug, user)
    except KeyError:
        return error_page(request, services, 404, f"There is no chapter called {slug!r}.")
    return render(request, services, "chapter.html", page=page)


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
