"""The source view: /source/{path} shows one file of the package, read-only, highlighted and
numbered (`#L42` marks a line). A path the view does not show is a 404 page that says why."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from kplay.app.book import Book
from kplay.app.deps import ServicesDep
from kplay.app.render import render
from kplay.app.services.sourceview import (
    SourcePage,
    SourceRefused,
    SourceTree,
    installed_tree,
    source_url,
)

router = APIRouter(include_in_schema=False)


def _tree(request: Request) -> SourceTree:
    """The app's tree: the installed package's, unless the app was given another."""
    tree: SourceTree | None = getattr(request.app.state, "source_tree", None)
    return tree if tree is not None else installed_tree()


def _cited_by(book: Book, path: str) -> tuple[tuple[str, str], ...]:
    """The chapters whose prose links to `path`, in reading order."""
    href = source_url(path)
    marks = (f'href="{href}"', f'href="{href}#')
    return tuple(
        (chapter.url, chapter.label)
        for chapter in book.chapters()
        if any(isinstance(s, str) and any(m in s for m in marks) for s in chapter.segments)
    )


@router.get("/source", response_class=HTMLResponse)
@router.get("/source/{path:path}", response_class=HTMLResponse)
def source(request: Request, services: ServicesDep, path: str = "") -> Response:
    raw = request.scope.get("raw_path") or b""
    try:
        if b"%" in raw:
            # No servable name needs escaping; an escaped '/', '.' or backslash is a way around the
            # checks on the decoded path, so it is refused before them.
            raise SourceRefused(
                f"{raw.decode('ascii', 'replace')[:120]!r} is percent-encoded: the view takes "
                "plain paths, such as /source/kernels/check.py."
            )
        shown = _tree(request).read(path)
    except SourceRefused as refused:
        page = SourcePage(
            title="Source not shown", path=path, refusal=refused.message, files=refused.files
        )
        return render(request, services, "source.html", status_code=404, page=page)
    page = SourcePage(
        title=shown.path, path=shown.path, file=shown, cited_by=_cited_by(services.book, path)
    )
    return render(request, services, "source.html", page=page)
