"""The problem catalog's pages: every problem and exercise, each one runnable."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.render import render
from kplay.app.services import catalog_view
from kplay.kernels.names import unknown

router = APIRouter(include_in_schema=False)


@router.get("/problems", response_class=HTMLResponse)
def problems(request: Request, services: ServicesDep, runs: RunsDep, user: UserDep) -> Response:
    page = catalog_view.catalog_page(services.book, services.catalog, runs, user)
    return render(request, services, "problems.html", page=page)


@router.get("/problems/{slug}", response_class=HTMLResponse)
def problem(
    slug: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    if slug not in services.catalog:
        message = unknown("problem", slug, services.catalog)
        page = catalog_view.missing_page(message, services.catalog)
        return render(request, services, "problems_missing.html", status_code=404, page=page)
    page = catalog_view.problem_page(services.book, services.catalog, runs, slug, user)
    return render(request, services, "problems_one.html", page=page)
