"""The two stores of app.services.search, behind one interface (`Store`).

- `Fts5Store`: SQLite FTS5 in a private in-memory database of this process (the embedded
  mode), columns weighted for bm25;
- `PostgresStore`: PostgreSQL full-text search in `search_entries` (migration 0002), whose
  `document` column weights headings A, keywords B, the chapter's title C and the text D.

Both take plain words only (app.services.search.terms_of): each reaches the engine quoted, so
nothing in a query is read as an operator. Highlights mark matches with START and STOP.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Engine, text

CANDIDATES = 200
# Marks around matched words in highlights: characters no book text contains (they are
# stripped from the entries), replaced by <mark> only after the text has been escaped.
START, STOP = "\x02", "\x03"
_PG_LOCK_KEY = 0x6B706C6179  # one rebuild at a time across the web processes


@dataclass(frozen=True)
class Entry:
    kind: str  # "section" or "problem"
    heading: str
    chapter: str  # the chapter's label: where a section is, or where a problem is embedded
    keywords: str
    body: str
    url: str | None
    part: str


@dataclass(frozen=True)
class Row:
    kind: str
    heading: str
    chapter: str
    part: str
    url: str | None
    heading_marked: str
    chapter_marked: str
    snippet_marked: str


class Store(Protocol):
    # Called by the search service only when the book has changed, one call at a time.
    def sync(self, entries: list[Entry], signature: str) -> None: ...

    def query(self, terms: tuple[str, ...], every: bool) -> list[Row]: ...


class Fts5Store:
    """SQLite FTS5 in a private in-memory database (the embedded mode)."""

    WEIGHTS = "10.0, 2.0, 4.0, 1.0"  # heading, chapter, keywords, body

    def __init__(self) -> None:
        self._conn = sqlite3.connect(":memory:", check_same_thread=False)
        self._lock = threading.Lock()  # one connection: queries and rebuilds take turns

    def sync(self, entries: list[Entry], signature: str) -> None:
        with self._lock:
            conn = self._conn
            conn.execute("DROP TABLE IF EXISTS entries")
            conn.execute(
                "CREATE VIRTUAL TABLE entries USING fts5(heading, chapter, keywords, body, "
                "kind UNINDEXED, url UNINDEXED, part UNINDEXED, "
                "tokenize = 'porter unicode61 remove_diacritics 2')"
            )
            conn.executemany(
                "INSERT INTO entries (rowid, heading, chapter, keywords, body, kind, url, part) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (i, e.heading, e.chapter, e.keywords, e.body, e.kind, e.url, e.part)
                    for i, e in enumerate(entries)
                ],
            )
            conn.commit()

    def query(self, terms: tuple[str, ...], every: bool) -> list[Row]:
        # Each word a quoted string: FTS5 reads nothing in it as an operator.
        match = (" AND " if every else " OR ").join(f'"{t}"' for t in terms)
        sql = (
            "SELECT kind, heading, chapter, part, url, highlight(entries, 0, :a, :b), "
            "highlight(entries, 1, :a, :b), snippet(entries, 3, :a, :b, '…', 28) "
            "FROM entries WHERE entries MATCH :m "
            f"ORDER BY bm25(entries, {self.WEIGHTS}), rowid LIMIT :n"
        )
        with self._lock:
            found = self._conn.execute(
                sql, {"a": START, "b": STOP, "m": match, "n": CANDIDATES}
            ).fetchall()
        return [Row(*row) for row in found]


class PostgresStore:
    """PostgreSQL full-text search in `search_entries` (the distributed mode)."""

    HEADLINE = f'StartSel="{START}", StopSel="{STOP}", MinWords=15, MaxWords=35'

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def sync(self, entries: list[Entry], signature: str) -> None:
        with self.engine.begin() as conn:
            # Web processes starting together rewrite the rows one after another.
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": _PG_LOCK_KEY})
            stored = conn.execute(text("SELECT signature FROM search_entries LIMIT 1"))
            if stored.scalar() != signature:
                conn.execute(text("DELETE FROM search_entries"))
                if entries:
                    conn.execute(
                        text(
                            "INSERT INTO search_entries (id, kind, heading, chapter, "
                            "keywords, body, url, part, signature) VALUES (:id, :kind, "
                            ":heading, :chapter, :keywords, :body, :url, :part, :sig)"
                        ),
                        [{"id": i, "sig": signature, **vars(e)} for i, e in enumerate(entries)],
                    )

    def query(self, terms: tuple[str, ...], every: bool) -> list[Row]:
        # Quoted lexemes: to_tsquery stems each and reads nothing in it as an operator.
        tsquery = (" & " if every else " | ").join(f"'{t}'" for t in terms)
        sql = text(
            "SELECT kind, heading, chapter, part, url, "
            "ts_headline('english', heading, q, :all), ts_headline('english', chapter, q, :all), "
            "ts_headline('english', body, q, :some) "
            "FROM search_entries, to_tsquery('english', :q) AS q WHERE document @@ q "
            "ORDER BY ts_rank(document, q) DESC, id LIMIT :n"
        )
        params = {
            "q": tsquery,
            "all": self.HEADLINE + ", HighlightAll=true",
            "some": self.HEADLINE,
            "n": CANDIDATES,
        }
        with self.engine.connect() as conn:
            return [Row(*row) for row in conn.execute(sql, params)]
