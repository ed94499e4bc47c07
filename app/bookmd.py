"""Markdown for the book: front matter, tables, footnotes, anchors, admonitions, Pygments,
and the `kernel-cell` fenced directive that places an editable kernel in a chapter.

A cell's `id` is written in the cell and never derived from the chapter's file, slug or
part: readers' run histories hang on it, so a chapter can be renamed or moved freely."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from mdit_py_plugins.admon import admon_plugin
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.footnote import footnote_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name
from pygments.util import ClassNotFound

from kplay.app.bookfront import BookError, FrontMatter, parse_front
from kplay.app.services.exercisespec import is_exercise_key, parse_exercise
from kplay.app.services.sourceview import source_href
from kplay.kernels.problem import ProblemSpec

__all__ = ["BookError", "CellSpec", "RenderedMarkdown", "render"]

CELL_INFO = "kernel-cell"
CELL_KEYS = ("id", "problem", "backend", "backends", "title")
_CELL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
_PLACEHOLDER = re.compile(r"<!--kplay-cell:([A-Za-z0-9_.-]+)-->\n?")
_LEXER_ALIASES = {"cu": "cuda", "c++": "cpp", "py": "python", "sh": "console"}


@dataclass(frozen=True)
class CellSpec:
    id: str
    problem: str
    backend: str
    backends: tuple[str, ...]
    title: str | None
    chapter: str
    path: Path
    line: int
    # The kind of exercise beyond "correct and fast" (app.services.exercisespec), if any.
    exercise: Any = None


@dataclass(frozen=True)
class RenderedMarkdown:
    front: FrontMatter | None
    # Prose HTML with the cells in reading order between the pieces.
    segments: tuple[str | CellSpec, ...]
    cells: tuple[CellSpec, ...]


def _strip_comment(value: str) -> str:
    # "cuda, triton   # optional" -> "cuda, triton"; a '#' glued to text stays (ids, formulas).
    return re.split(r"\s+#", value, maxsplit=1)[0].strip()


def parse_pairs(text: str, path: Path, first_line: int, what: str) -> dict[str, tuple[str, int]]:
    """`key: value` lines (blank lines and # comments skipped) -> {key: (value, line)}."""
    out: dict[str, tuple[str, int]] = {}
    for offset, raw in enumerate(text.splitlines()):
        line = first_line + offset
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        key, sep, value = stripped.partition(":")
        key = key.strip()
        if not sep or not key:
            raise BookError(path, line, f"{what}: expected 'key: value', got {stripped!r}")
        if key in out:
            raise BookError(path, line, f"{what}: {key!r} given twice")
        value = _strip_comment(value)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        out[key] = (value, line)
    return out


def parse_cell(
    token: Token, path: Path, chapter: str, problems: Mapping[str, ProblemSpec]
) -> CellSpec:
    start = (token.map[0] + 1) if token.map else 0
    if token.level != 0:
        # The page places cells between pieces of prose; a cell inside a list, quote or
        # admonition would cut that block in two.
        raise BookError(path, start, "a kernel-cell must stand on its own, not inside a block")
    fields = parse_pairs(token.content, path, start + 1, "kernel-cell")
    unknown = sorted(k for k in set(fields) - set(CELL_KEYS) if not is_exercise_key(k))
    if unknown:
        raise BookError(path, start, f"kernel-cell: unknown key(s) {unknown}; use {CELL_KEYS}")
    for key in ("id", "problem", "backend"):
        if not fields.get(key, ("", 0))[0]:
            raise BookError(path, start, f"kernel-cell: missing '{key}'")
    cell_id, id_line = fields["id"]
    if not _CELL_ID.match(cell_id):
        raise BookError(path, id_line, f"kernel-cell id {cell_id!r}: use letters, digits, . _ -")
    slug, slug_line = fields["problem"]
    problem = problems.get(slug)
    if problem is None:
        known = ", ".join(sorted(problems)) or "none"
        raise BookError(
            path, slug_line, f"kernel-cell {cell_id!r}: unknown problem {slug!r}; known: {known}"
        )
    backend, backend_line = fields["backend"]
    if "backends" in fields:
        text, backends_line = fields["backends"]
        backends = tuple(b.strip() for b in text.split(",") if b.strip())
    else:
        backends, backends_line = tuple(problem.backends), start
    for key, line in [(b, backends_line) for b in backends] + [(backend, backend_line)]:
        if key not in problem.backends:
            raise BookError(
                path,
                line,
                f"kernel-cell {cell_id!r}: problem {slug!r} does not offer backend {key!r}; "
                f"it offers {', '.join(problem.backends)}",
            )
    if backend not in backends:
        raise BookError(
            path, backend_line, f"kernel-cell {cell_id!r}: backend {backend!r} not in backends"
        )
    title = fields.get("title", ("", 0))[0] or None
    exercise = parse_exercise(fields, path, start, cell_id, problem, backend, backends, problems)
    return CellSpec(cell_id, slug, backend, backends, title, chapter, path, start, exercise)


@lru_cache(maxsize=1)
def _formatter() -> HtmlFormatter[str]:
    return HtmlFormatter(nowrap=True)


def highlight_code(code: str, lang: str) -> str:
    name = _LEXER_ALIASES.get(lang.lower(), lang.lower())
    if not name:
        return html.escape(code)
    try:
        lexer = get_lexer_by_name(name, stripnl=False)
    except ClassNotFound:
        return html.escape(code)
    return highlight(code, lexer, _formatter())


def _render_fence(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    info = token.info.strip().split(maxsplit=1)[0] if token.info.strip() else ""
    if info == CELL_INFO:
        return f"<!--kplay-cell:{env['cells'][idx].id}-->\n"
    lang = html.escape(info)
    body = highlight_code(token.content, info)
    label = f'<span class="code-lang">{lang}</span>' if lang not in ("", "text", "console") else ""
    return (
        f'<div class="code-block" data-lang="{lang}">{label}<pre><code>{body}</code></pre></div>\n'
    )


def _inside_link(tokens: list[Token], idx: int) -> bool:
    depth = 0
    for tok in tokens[:idx]:
        depth += {"link_open": 1, "link_close": -1}.get(tok.type, 0)
    return depth > 0


def _render_code_inline(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
    """A code span; one that names a file of the package (`kernels/check.py`, or with a line,
    `kernels/check.py:42`) opens it in the source view."""
    code = RendererHTML.code_inline(self, tokens, idx, options, env)
    href = None if _inside_link(tokens, idx) else source_href(tokens[idx].content)
    return f'<a class="source-link" href="{href}">{code}</a>' if href else code


@lru_cache(maxsize=1)
def markdown() -> MarkdownIt:
    md = (
        MarkdownIt("commonmark", {"typographer": True})
        .enable(["table", "replacements", "smartquotes"])
        .use(front_matter_plugin)
        .use(footnote_plugin)
        .use(anchors_plugin, min_level=2, max_level=3, permalink=True, permalinkSymbol="#")
        .use(admon_plugin)
    )
    md.add_render_rule("fence", _render_fence)
    md.add_render_rule("code_inline", _render_code_inline)
    return md


def render(
    text: str, path: Path, problems: Mapping[str, ProblemSpec], default_slug: str
) -> RenderedMarkdown:
    md = markdown()
    tokens = md.parse(text)
    front: FrontMatter | None = None
    for tok in tokens:
        if tok.type == "front_matter":
            # The text between the two `---` lines; the first of them is line 1.
            front = parse_front(tok.content, path, (tok.map[0] if tok.map else 0) + 2)
            break
    slug = (front.slug if front else None) or default_slug
    cells: dict[int, CellSpec] = {}
    seen: dict[str, int] = {}
    for idx, tok in enumerate(tokens):
        if tok.type == "fence" and tok.info.strip().split(maxsplit=1)[:1] == [CELL_INFO]:
            cell = parse_cell(tok, path, slug, problems)
            if cell.id in seen:
                raise BookError(
                    path, cell.line, f"duplicate kernel-cell id {cell.id!r} (line {seen[cell.id]})"
                )
            seen[cell.id] = cell.line
            cells[idx] = cell
    body = md.renderer.render(tokens, md.options, {"cells": cells})
    by_id = {c.id: c for c in cells.values()}
    pieces = _PLACEHOLDER.split(body)
    segments: list[str | CellSpec] = []
    for i, piece in enumerate(pieces):
        if i % 2:
            segments.append(by_id[piece])
        elif piece.strip():
            segments.append(piece)
    return RenderedMarkdown(front, tuple(segments), tuple(cells.values()))
