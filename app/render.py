"""Template rendering shared by the HTML routers."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from fastapi.templating import Jinja2Templates

from kplay.app import format as fmt
from kplay.app.accounts import account_nav
from kplay.app.contexts import ErrorPage
from kplay.app.deps import Services
from kplay.app.localmode import banner
from kplay.kernels.ncuprofile import line_reasons
from kplay.resources import data_dir

TEMPLATES_DIR = data_dir("templates")
STATIC_DIR = data_dir("static")


@lru_cache(maxsize=256)
def _digest(path: Path, mtime: int) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:10]


def asset(name: str) -> str:
    """/static URL with a content hash, so a changed file is never served from a stale cache."""
    path = STATIC_DIR / name
    if not path.is_file():
        return f"/static/{name}"
    return f"/static/{name}?v={_digest(path, path.stat().st_mtime_ns)}"


def asset_exists(name: str) -> bool:
    return (STATIC_DIR / name).is_file()


def roman(number: int) -> str:
    """Part numbers as in print: 1 -> I, 4 -> IV."""
    out = ""
    for value, letters in (
        (1000, "M"),
        (900, "CM"),
        (500, "D"),
        (400, "CD"),
        (100, "C"),
        (90, "XC"),
        (50, "L"),
        (40, "XL"),
        (10, "X"),
        (9, "IX"),
        (5, "V"),
        (4, "IV"),
        (1, "I"),
    ):
        while number >= value:
            out += letters
            number -= value
    return out or "0"


def make_templates() -> Jinja2Templates:
    # Every page learns whether the server is in trusted local mode (base.html's note).
    templates = Jinja2Templates(
        directory=str(TEMPLATES_DIR), context_processors=[banner, account_nav]
    )
    env = templates.env
    env.globals.update(asset=asset, asset_exists=asset_exists, fmt=fmt, line_reasons=line_reasons)
    env.filters["roman"] = roman
    env.trim_blocks = True
    env.lstrip_blocks = True
    return templates


def render(
    request: Request, services: Services, name: str, status_code: int = 200, **context: Any
) -> Response:
    return services.templates.TemplateResponse(request, name, context, status_code=status_code)


def error_page(request: Request, services: Services, status: int, message: str) -> Response:
    titles = {404: "Not found", 500: "Something went wrong"}
    page = ErrorPage(title=titles.get(status, "Error"), status=status, message=message)
    return render(request, services, "error.html", status_code=status, page=page)
