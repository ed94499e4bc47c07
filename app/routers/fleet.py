"""The fleet: what can run jobs right now, as a page that refreshes itself and as JSON."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.deps import ServicesDep
from kplay.app.render import render
from kplay.app.services.fleet_view import fleet_page, fleet_snapshot
from kplay.workers.fleet_models import FleetSnapshot

router = APIRouter()


@router.get(
    "/api/v1/fleet",
    response_model=FleetSnapshot,
    tags=["api"],
    summary="Workers, queues and wait estimates",
)
def fleet_json(services: ServicesDep) -> FleetSnapshot:
    return fleet_snapshot(services.executor)


@router.get("/fleet", response_class=HTMLResponse, include_in_schema=False)
def fleet_html(request: Request, services: ServicesDep) -> Response:
    page = fleet_page(fleet_snapshot(services.executor))
    if request.headers.get("HX-Request"):
        # The page polls itself: answer with the named block only.
        template = services.templates.env.get_template("fleet.html")
        context = template.new_context({"request": request, "page": page})
        return HTMLResponse("".join(template.blocks["fleet"](context)))
    return render(request, services, "fleet.html", page=page)
