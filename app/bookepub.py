"""The book as an EPUB 3 file (`kplay book build --epub FILE`).

The chapters are the static site's (app.bookbuild): the app's `chapter.html` without the page
frame, each kernel cell as its highlighted starter source with a link into the playground.
A small stylesheet of its own keeps the book reflowable; the figures go in as SVG.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from ebooklib import epub

from kplay.app.book import Chapter
from kplay.app.bookbuild import CELL, COMMENT, Edition, Links, Sources, environment
from kplay.app.bookindex import Index
from kplay.app.render import STATIC_DIR, roman

CHAPTER_FILE = "{part_dir}-{slug}.xhtml"
TITLE_FILE = "title.xhtml"
INDEX_FILE = "index-of-terms.xhtml"
_CHART = re.compile(r'<svg [^>]*class="roofline-svg"[^>]*aria-label="([^"]*)">.*?</svg>', re.DOTALL)

# Plain CSS a reading system can override: no layout, the site's colours for code.
STYLE = """
body { font-family: serif; line-height: 1.45; }
h1, h2, h3, .eyebrow, .kcell-kicker, .code-lang, .chapter-nav { font-family: sans-serif; }
h1 .ch-no { color: #1d58b0; }
.eyebrow, .kcell-kicker { font-size: 0.8em; text-transform: uppercase; letter-spacing: 0.05em; }
.eyebrow a { color: inherit; text-decoration: none; }
.lede { font-size: 1.1em; color: #5b574f; }
a.header-anchor { display: none; }
code, pre { font-family: monospace; }
code { font-size: 0.9em; }
pre { font-size: 0.85em; }
pre code { font-size: 1em; }
pre { white-space: pre-wrap; overflow-wrap: break-word; margin: 0; }
.code-block { background: #f3f0e9; border: 1px solid #d8d2c5; padding: 0.5em 0.7em; margin: 1em 0; }
.code-lang { display: block; text-align: right; font-size: 0.7em; color: #5b574f; }
.code-block .k, .code-block .kd, .code-block .kn, .code-block .kr, .code-block .kc,
.code-block .ow, .code-block .cp, .code-block .cpf { color: #8c2f8f; }
.code-block .kt, .code-block .nc, .code-block .nb, .code-block .bp { color: #8a5200; }
.code-block .s, .code-block .s1, .code-block .s2, .code-block .sa, .code-block .sd,
.code-block .se, .code-block .si, .code-block .sc { color: #1d6b3c; }
.code-block .m, .code-block .mi, .code-block .mf, .code-block .mh,
.code-block .il { color: #a03c00; }
.code-block .c, .code-block .c1, .code-block .cm, .code-block .ch, .code-block .cs {
  color: #6b675f; font-style: italic; }
.code-block .nf, .code-block .fm, .code-block .nd { color: #1d58b0; }
.kcell { border: 1px solid #d8d2c5; padding: 0.3em 0.8em; margin: 1.5em 0; }
.kcell-title { margin-top: 0.2em; }
img { max-width: 100%; }
table { border-collapse: collapse; }
th, td { border-bottom: 1px solid #d8d2c5; padding: 0.2em 0.5em; text-align: left; }
.admonition { border-left: 3px solid #1d58b0; padding-left: 0.8em; }
.chapter-nav a { display: block; margin: 0.3em 0; }
.nav-dir { font-weight: bold; margin-right: 0.5em; }
figure { margin: 1em 0; }
figcaption { font-size: 0.9em; color: #5b574f; }
.fig-no { font-weight: bold; color: #2b2a27; }
.kcell-snapshot { border-top: 1px solid #d8d2c5; padding-top: 0.4em; }
.snapshot-verdict { font-weight: bold; color: #1d6b3c; }
.snapshot-numbers th { font-weight: normal; color: #5b574f; padding-right: 1em; border: 0; }
.snapshot-numbers td { border: 0; }
.roofline-svg { max-width: 100%; height: auto; }
.index-list dt { font-weight: bold; margin-top: 0.3em; }
.index-list dd { margin-left: 1.5em; }
caption.table-no { text-align: left; font-weight: bold; font-size: 0.85em; }
"""


def _charts_as_files(body: str, charts: dict[str, str]) -> str:
    """`body` with each inline roofline chart replaced by an image of its own file (kept in
    `charts`): reading systems parse chapters as XHTML, where inline SVG is fragile."""

    def one(m: re.Match[str]) -> str:
        name = f"charts/chart-{len(charts) + 1}.svg"
        charts[name] = '<?xml version="1.0" encoding="UTF-8"?>\n' + m.group(0)
        label = html.escape(m.group(1))
        return f'<img class="roofline-svg" src="{name}" alt="{label}" />'

    return _CHART.sub(one, body)


def _file(chapter: Chapter) -> str:
    return CHAPTER_FILE.format(part_dir=chapter.part_dir, slug=chapter.slug)


def _document(title: str, body: str) -> str:
    return f"<html><head><title>{html.escape(title)}</title></head><body>{body}</body></html>"


def _title_page(edition: Edition) -> str:
    e = html.escape
    return (
        f'<section class="title-page" epub:type="titlepage"><h1>{e(edition.title)}</h1>'
        '<p class="lede">From the CPU to AI-written kernels.</p>'
        f"<p>{e(edition.line)}.</p>"
        "<p>Each kernel cell shows its starter source; its “Run this online” link opens it in "
        f'the playground at <a href="{e(edition.playground)}/">{e(edition.playground)}</a>, '
        "where it can be edited, compiled, checked, timed and placed on the roofline.</p>"
        "</section>"
    )


def build_epub(src: Sources, dest: Path) -> Path:
    """Writes the book to the EPUB file `dest`: every chapter, every figure they show, the
    reference cards' rooflines (inline SVG) and the index of terms."""
    book, edition = src.book, src.edition
    env = environment({"base.html": "{% block main %}{% endblock %}", "fragments/cell.html": CELL})
    links = Links(
        book,
        edition.playground,
        CHAPTER_FILE,
        "nav.xhtml",
        index_anchors=False,
        terms_file=INDEX_FILE,
    )
    index = Index(src.terms)
    charts: dict[str, str] = {}  # file name: SVG of a reference card's roofline
    out = epub.EpubBook()
    out.set_identifier(edition.identifier)
    out.set_title(edition.title)
    out.set_language("en")
    out.add_metadata("DC", "publisher", "Kernel Playground")
    out.add_metadata("DC", "date", edition.date)
    out.add_metadata("DC", "source", f"commit {edition.commit}")
    out.add_metadata("DC", "description", f"{edition.title}: {edition.line}.")
    style = epub.EpubItem(
        uid="style", file_name="style/book.css", media_type="text/css", content=STYLE
    )
    out.add_item(style)
    title = epub.EpubHtml(title=edition.title, file_name=TITLE_FILE, lang="en")
    title.content = _document(edition.title, _title_page(edition))
    title.add_item(style)
    out.add_item(title)
    toc: list[tuple[epub.Section, list[epub.EpubHtml]]] = []
    spine: list[object] = [title, "nav"]
    for part in book.parts():
        items = []
        for chapter in part.chapters:
            page = src.page(chapter, index)
            body = links.rewrite(env.get_template("chapter.html").render(page=page), "")
            # Notes to the authors stay out: XML allows no "--" inside a comment.
            body = COMMENT.sub("", body)
            item = epub.EpubHtml(
                title=chapter.label,
                file_name=CHAPTER_FILE.format(part_dir=chapter.part_dir, slug=chapter.slug),
                lang="en",
            )
            body = _charts_as_files(body, charts)
            item.content = _document(chapter.label, body)
            item.add_item(style)
            out.add_item(item)
            items.append(item)
        spine += items
        toc.append((epub.Section(f"Part {roman(part.number)} · {part.title}"), items))
    if index.used():
        listing = index.render(
            lambda ch, anchor: (
                CHAPTER_FILE.format(part_dir=ch.part_dir, slug=ch.slug) + "#" + anchor
            )
        )
        terms = epub.EpubHtml(title="Index", file_name=INDEX_FILE, lang="en")
        terms.content = _document("Index", listing)
        terms.add_item(style)
        out.add_item(terms)
        spine.append(terms)
        toc.append(terms)  # type: ignore[arg-type]
    for name in sorted(links.used):
        media = "image/svg+xml" if name.endswith(".svg") else None
        if media is None:
            raise ValueError(f"the chapters link to static/{name}, which an EPUB cannot show")
        image = epub.EpubImage(
            uid=f"fig-{Path(name).stem}",
            file_name=f"static/{name}",
            media_type=media,
            content=(STATIC_DIR / name).read_bytes(),
        )
        out.add_item(image)
    for name, svg in charts.items():
        out.add_item(
            epub.EpubImage(
                uid=Path(name).stem, file_name=name, media_type="image/svg+xml", content=svg
            )
        )
    out.toc = [epub.Link(TITLE_FILE, edition.title, "title"), *toc]
    out.add_item(epub.EpubNcx())
    out.add_item(epub.EpubNav())
    out.spine = spine
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    epub.write_epub(str(dest), out)
    return dest
