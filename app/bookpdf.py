"""The book as a PDF (`kplay book build --pdf FILE`), laid out by WeasyPrint.

One HTML document holds the whole book: a title page, the contents with page numbers, each
part's title, its chapters (the same pages as the site's and the EPUB's: numbered figures,
cells as their source with a recorded reference card, the measured figures of the results
folder) and the index of terms with page numbers. The print stylesheet
(static/css/print-book.css) sets the pages: A4, page numbers, the chapter's title as the
running head, the site's fonts embedded, code that wraps at the text block's edge instead
of running past it (said on the title page's reverse), figures kept with their captions.

Ids are made unique across the book by prefixing each chapter's with its own name, and
every link between chapters becomes a link inside the document.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

from kplay.app.book import Chapter
from kplay.app.bookbuild import CELL, COMMENT, Links, Sources, environment
from kplay.app.bookindex import Index, chapter_label
from kplay.app.render import STATIC_DIR, roman

PRINT_CSS = "css/print-book.css"
FONTS_CSS = "fonts/fonts.css"
# WeasyPrint takes no weight range in @font-face (it warns and drops the line); without it a
# variable font is still found for every weight, so the range is left out here.
_WEIGHT_RANGE = re.compile(r"font-weight:\s*\d+\s+\d+;")
_ID = re.compile(r'(\sid=")([^"]+)(")')
_LOCAL_HREF = re.compile(r'(\shref="#)([^"]+)(")')
CHAPTER_BODY = "{% block main %}{% endblock %}"


def namespace(chapter: Chapter) -> str:
    return f"{chapter.part_dir}-{chapter.slug}"


class PdfLinks(Links):
    """Links of one document: a chapter is its anchor, a place in it the prefixed id."""

    def target(self, url: str) -> str:
        path, hash_, fragment = url.partition("#")
        found = re.fullmatch(r"/book/(?:p\d+/)?([a-z0-9-]+)", path.partition("?")[0])
        chapter = self.by_slug.get(found.group(1)) if found else None
        if chapter is not None:
            ns = namespace(chapter)
            return f"#{ns}--{fragment}" if hash_ and fragment else f"#ch-{ns}"
        return super().target(url)


def _scoped(body: str, ns: str) -> str:
    """A chapter's HTML with its ids, and its links to them, prefixed by `ns`; a link to a
    place outside the chapter (the contents, another chapter, the index) is left alone."""
    own = {m.group(2) for m in _ID.finditer(body)}
    body = _ID.sub(lambda m: f"{m.group(1)}{ns}--{m.group(2)}{m.group(3)}", body)

    def href(m: re.Match[str]) -> str:
        if m.group(2) not in own:
            return m.group(0)
        return f"{m.group(1)}{ns}--{m.group(2)}{m.group(3)}"

    return _LOCAL_HREF.sub(href, body)


def _front(src: Sources) -> str:
    e = html.escape
    ed = src.edition
    contents = []
    for part in src.book.parts():
        rows = "".join(
            f'<li><a class="toc-ref" href="#ch-{namespace(ch)}">'
            f'<span class="toc-no">{roman(ch.part)}.{e(ch.number)}</span> {e(ch.title)}</a></li>'
            for ch in part.chapters
        )
        contents.append(
            f'<li class="toc-part"><a class="toc-ref" href="#part-{part.number}">'
            f"Part {roman(part.number)} · {e(part.title)}</a><ol>{rows}</ol></li>"
        )
    return (
        '<section class="title-page"><h1 class="book-title">'
        f'{e(ed.title)}</h1><p class="subtitle">From the CPU to AI-written kernels</p>'
        f'<p class="edition">{e(ed.line)}</p></section>'
        '<section class="colophon"><p>This edition was built from the book\'s sources at the '
        "commit named above; every measured figure in it is read from the benchmark records of "
        "that commit. Each kernel cell prints its starter source and a recorded reference run; "
        "its link opens the cell in the playground at "
        f'<a href="{e(ed.playground)}/">{e(ed.playground)}</a>, where it can be edited, '
        "compiled, checked, timed and placed on the roofline.</p>"
        "<p>Code is set in a narrow monospace face. A line too long for the page is wrapped at "
        "the edge of the text block and continues, indented, on the next line: no code is cut "
        "off. Read a wrapped line as one line.</p></section>"
        '<nav class="book-toc" id="book-toc"><h1 class="toc-title">Contents</h1>'
        f'<ol>{"".join(contents)}<li class="toc-part"><a class="toc-ref" '
        'href="#index-of-terms">Index</a></li></ol></nav>'
    )


def document(src: Sources) -> str:
    """The whole book as one HTML document for WeasyPrint."""
    env = environment({"base.html": CHAPTER_BODY, "fragments/cell.html": CELL})
    links = PdfLinks(
        src.book,
        src.edition.playground,
        "#ch-{part_dir}-{slug}",
        "#book-toc",
        False,
        "#index-of-terms",
    )
    index = Index(src.terms)
    parts_html = []
    for part in src.book.parts():
        chapters = []
        for chapter in part.chapters:
            page = src.page(chapter, index)
            body = env.get_template("chapter.html").render(page=page)
            body = COMMENT.sub("", links.rewrite(body, ""))
            ns = namespace(chapter)
            chapters.append(
                f'<section class="book-chapter" id="ch-{ns}" '
                f'data-label="{html.escape(chapter_label(chapter))}" '
                f'data-title="{html.escape(chapter.title)}">{_scoped(body, ns)}</section>'
            )
        parts_html.append(
            f'<section class="book-part" id="part-{part.number}"><p class="part-no">Part '
            f'{roman(part.number)}</p><h1 class="part-title">{html.escape(part.title)}</h1>'
            f"</section>{''.join(chapters)}"
        )
    listing = index.render(lambda ch, anchor: f"#{namespace(ch)}--{anchor}", page_numbers=True)
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(src.edition.title)}</title></head><body>"
        f"{_front(src)}{''.join(parts_html)}{listing}</body></html>"
    )


def layout(src: Sources) -> Any:
    """The book laid out in pages (a WeasyPrint Document), with the edition in its metadata."""
    from weasyprint import CSS, HTML
    from weasyprint.text.fonts import FontConfiguration

    fonts = FontConfiguration()  # without it the site's @font-face rules are not read
    faces = _WEIGHT_RANGE.sub("", (STATIC_DIR / FONTS_CSS).read_text(encoding="utf-8"))
    base = (STATIC_DIR / FONTS_CSS).parent.as_uri() + "/"
    styles = [
        CSS(string=faces, base_url=base, font_config=fonts),
        CSS(filename=str(STATIC_DIR / PRINT_CSS), font_config=fonts),
    ]
    doc = HTML(string=document(src), base_url=str(STATIC_DIR.parent) + "/").render(
        stylesheets=styles, font_config=fonts
    )
    doc.metadata.title = src.edition.title
    doc.metadata.description = src.edition.line
    doc.metadata.authors = ["Kernel Playground"]
    doc.metadata.created = src.edition.date
    return doc


def build_pdf(src: Sources, dest: Path) -> Path:
    """Lays the book out and writes the PDF `dest`."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    layout(src).write_pdf(str(dest))
    return dest
