"""The compiler panel of one run, fetched when a reader opens it: /runs/{id}/compiler."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.deps import RunsDep, ServicesDep, UserDep
from kplay.app.render import render
from kplay.app.services import compiler_view
from kplay.app.services.runs import RunNotFound

router = APIRouter(include_in_schema=False)


@router.get("/runs/{run_id}/compiler", response_class=HTMLResponse)
def compiler_panel(
    run_id: str, request: Request, services: ServicesDep, runs: RunsDep, user: UserDep
) -> Response:
    # Another reader's run is "no run", as is one that does not exist.
    try:
        run = runs.visible(run_id, user)
    except RunNotFound:
        message = f"no run {run_id!r}"
        return render(
            request, services, "fragments/compiler.html", status_code=404, view=None,
            message=message,
        )  # fmt: skip
    view = compiler_view.build(run, services.catalog)
    return render(request, services, "fragments/compiler.html", view=view)
