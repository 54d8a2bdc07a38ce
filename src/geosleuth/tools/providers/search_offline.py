"""Offline web search: a SQLite FTS5 index over gazetteer places and the user's documents.

The index is built once into the data dir and rebuilt when the document set changes.
Documents: ``.txt`` / ``.md`` files (split into passages) and ``.jsonl`` rows with
``title``, ``url`` and ``text``. Scripts written without spaces (Chinese, Japanese, Thai)
fall back to substring matching on titles, since the word tokenizer keeps whole runs.

Exact names rank above partial matches: a place whose own or alternate name is a phrase of
the query ("Lisboa" in "Rua Augusta Lisboa" is Lisbon), and a document whose title is one,
come before documents that merely share a word with the query ("João Lisboa", Brazil).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from geosleuth.core.records import Place
from geosleuth.core.text import normalize
from geosleuth.tools.providers.base import SearchHit

PASSAGE_CHARS = 1500
CANDIDATES = 5
"""Full-text hits fetched per result wanted, so that exact names further down can move up."""
MAX_QUERY_WORDS = 12
"""Words of a query looked up as place names (n-grams of up to 4 of them)."""
INDEX_VERSION = 2
_WORD = re.compile(r"\w+", re.UNICODE)
_SPACELESS = re.compile(r"[\u0e00-\u0e7f\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _gazetteer_documents() -> Iterator[tuple[str, str, str, float]]:
    """A document per gazetteer city, from one bulk query of plain rows (a `Place` per row costs more)."""
    from geosleuth.core.countries import country_name
    from geosleuth.gazetteer import get_gazetteer

    names: dict[str, str | None] = {}
    for pid, name, lat, lon, cc, admin1, population, kind in get_gazetteer().iter_rows(kind="city"):
        if cc and cc not in names:
            names[cc] = country_name(cc)
        country = (names[cc] if cc else None) or cc or None
        yield _document(pid, name, lat, lon, country, admin1, int(population or 0), kind)


def place_document(p: Place) -> tuple[str, str, str, float]:
    """(title, body, url, boost) for one gazetteer place."""
    return _document(p.id, p.name, p.lat, p.lon, p.country or p.country_code, p.admin1, p.population, p.kind)


def _document(
    pid: str,
    name: str,
    lat: float,
    lon: float,
    country: str | None,
    admin1: str | None,
    population: int,
    kind: str,
) -> tuple[str, str, str, float]:
    where = ", ".join(x for x in (admin1, country) if x and x != name)
    body = f"{name} is a {kind}{' in ' + where if where else ''}."
    if population:
        body += f" Population {population:,}."
    body += f" Coordinates {lat:.4f}, {lon:.4f}."
    url = (
        f"https://www.geonames.org/{pid.split(':', 1)[1]}"
        if pid.startswith("geonames:")
        else f"gazetteer:{pid}"
    )
    return name, body, url, math.log10(1 + max(population, 0))


def _passages(text: str) -> Iterator[str]:
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]
    buf = ""
    for para in paragraphs:
        if buf and len(buf) + len(para) > PASSAGE_CHARS:
            yield buf
            buf = ""
        buf = f"{buf}\n\n{para}" if buf else para
        while len(buf) > PASSAGE_CHARS:
            yield buf[:PASSAGE_CHARS]
            buf = buf[PASSAGE_CHARS:]
    if buf:
        yield buf


def document_rows(path: Path) -> Iterator[tuple[str, str, str, float]]:
    """(title, body, url, boost) rows for one user document file."""
    if path.suffix.lower() == ".jsonl":
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    raise ValueError(f"{path}:{n + 1}: not valid JSON") from None
                if not isinstance(row, dict):
                    raise ValueError(f"{path}:{n + 1}: expected a JSON object with a text field")
                text = str(row.get("text") or row.get("content") or "")
                title = str(row.get("title") or text[:60])
                url = str(row.get("url") or f"{path.resolve().as_uri()}#{n + 1}")
                for i, passage in enumerate(list(_passages(text)) or [text]):
                    yield title, passage, url if i == 0 else f"{url}#p{i}", 1.0
        return
    text = path.read_text(encoding="utf-8", errors="replace")
    first = next((ln.strip("# ").strip() for ln in text.splitlines() if ln.strip()), path.stem)
    for i, passage in enumerate(_passages(text)):
        yield first[:120], passage, f"{path.resolve().as_uri()}#p{i}", 1.0


class OfflineSearchIndex:
    """FTS5 index file; one connection per thread."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._local = threading.local()
        self._doc_count: int | None = None

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path)
            self._local.conn = conn
        return conn

    @classmethod
    def build(cls, path: Path, rows: Iterable[tuple[str, str, str, float]]) -> OfflineSearchIndex:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        tmp.unlink(missing_ok=True)
        conn = sqlite3.connect(tmp)
        conn.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(title, body, url UNINDEXED, boost UNINDEXED,"
            " tokenize='unicode61 remove_diacritics 2')"
        )
        conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?)", rows)
        conn.execute("INSERT INTO docs(docs) VALUES ('optimize')")
        conn.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab(docs, 'row')")
        conn.commit()
        conn.close()
        os.replace(tmp, path)
        return cls(path)

    def informative(self, words: list[str]) -> list[str]:
        """The words of a query that are not in most documents (see `_informative`)."""
        return self._informative(self._conn(), words) if words else []

    def _informative(self, conn: sqlite3.Connection, words: list[str]) -> list[str]:
        """Drop words most documents contain ("city", "in"): they match everything and rank nothing.

        Frequencies come from the index's own vocabulary; if every word is common, keep them all.
        """
        if self._doc_count is None:
            self._doc_count = conn.execute("SELECT count(*) FROM docs_docsize").fetchone()[0] or 1
        marks = ",".join("?" * len(words))
        sql = f"SELECT term, doc FROM vocab WHERE term IN ({marks})"
        df = dict(conn.execute(sql, [w.lower() for w in words]).fetchall())
        rare = [w for w in words if df.get(w.lower(), 0) <= 0.02 * self._doc_count]
        return rare or words

    def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        words = [w for w in _WORD.findall(query) if w]
        if not words:
            return []
        conn = self._conn()
        words = self._informative(conn, words)
        quoted = ['"' + w.replace('"', '""') + '"' for w in words]
        sql = (
            "SELECT title, url, snippet(docs, 1, '', '', ' … ', 40) FROM docs WHERE docs MATCH ?"
            " ORDER BY bm25(docs, 5.0, 1.0) - 0.3 * boost LIMIT ?"
        )
        rows = conn.execute(sql, (" AND ".join(quoted), max_results)).fetchall()
        if not rows and len(words) > 1:
            rows = conn.execute(sql, (" OR ".join(quoted), max_results)).fetchall()
        if len(rows) < max_results and _SPACELESS.search(query):
            seen = {r[1] for r in rows}
            like = conn.execute(
                "SELECT title, url, substr(body, 1, 240) FROM docs WHERE title LIKE ? OR body LIKE ?"
                " ORDER BY boost DESC LIMIT ?",
                (f"%{words[0]}%", f"%{words[0]}%", max_results * 2),
            ).fetchall()
            rows += [r for r in like if r[1] not in seen]
        return [SearchHit(title=t, url=u, snippet=s) for t, u, s in rows[:max_results]]


def _fingerprint(documents: list[Path], with_gazetteer: bool) -> str:
    h = hashlib.sha256(f"v{INDEX_VERSION}:{with_gazetteer}".encode())
    if with_gazetteer:
        from geosleuth.gazetteer import build as gbuild

        h.update(gbuild.index_fingerprint().encode())
    for p in sorted(documents):
        st = p.stat()
        h.update(f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()[:16]


class OfflineSearchProvider:
    """``web_search`` with no network: gazetteer places plus the user's documents."""

    name = "offline"

    def __init__(self, data_dir: Path, documents: Iterable[Path] = (), with_gazetteer: bool = True) -> None:
        self.documents = [Path(p) for p in documents]
        missing = [str(p) for p in self.documents if not p.is_file()]
        if missing:
            raise ValueError(f"search document(s) not found: {', '.join(missing)}")
        self.data_dir = data_dir
        self.with_gazetteer = with_gazetteer
        self._index: OfflineSearchIndex | None = None
        self._lock = threading.Lock()

    @property
    def identity(self) -> str:
        return f"offline-search:{_fingerprint(self.documents, self.with_gazetteer)}"

    def index(self) -> OfflineSearchIndex:
        with self._lock:
            if self._index is None:
                path = (
                    self.data_dir
                    / "tools"
                    / f"search-{_fingerprint(self.documents, self.with_gazetteer)}.sqlite"
                )
                if path.exists():
                    self._index = OfflineSearchIndex(path)
                else:
                    self._index = OfflineSearchIndex.build(path, self._rows())
            return self._index

    def _rows(self) -> Iterator[tuple[str, str, str, float]]:
        for doc in self.documents:
            yield from document_rows(doc)
        if self.with_gazetteer:
            yield from _gazetteer_documents()

    def search_sync(self, query: str, max_results: int = 10) -> list[SearchHit]:
        """Exact names first (gazetteer places, then documents titled with a query phrase), then
        the full-text ranking."""
        index = self.index()
        hits = index.search(query, max_results * CANDIDATES)
        phrases = _phrases(query)
        words = normalize(query).split()[:MAX_QUERY_WORDS]
        rare = {w.lower() for w in index.informative(words)} if len(words) > 1 else set(words)
        exact = _exact_places(words, rare) if self.with_gazetteer else []
        named = {normalize(h.title) for h in exact}
        titled = [h for h in hits if _titled(normalize(h.title), phrases, named)]
        out: dict[str, SearchHit] = {}
        for hit in [*exact, *titled, *hits]:
            out.setdefault(hit.url, hit)
        return list(out.values())[:max_results]

    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        import asyncio

        return await asyncio.to_thread(self.search_sync, query, max_results)


def _titled(title: str, phrases: set[str], named: set[str]) -> bool:
    """A document titled with a phrase of the query, unless that phrase is only part of a longer
    place name already matched ("York" when the query says "New York")."""
    return title in phrases and not any(title != n and f" {title} " in f" {n} " for n in named)


def _phrases(query: str) -> set[str]:
    """Every run of up to 4 consecutive words of the query, as comparison keys."""
    words = normalize(query).split()[:MAX_QUERY_WORDS]
    return {" ".join(words[i : i + n]) for n in range(1, 5) for i in range(len(words) - n + 1)}


def _exact_places(words: list[str], rare: set[str]) -> list[SearchHit]:
    """Gazetteer places named (own or alternate name) by a phrase of the query.

    First a place that another name of the query agrees with, read as an address
    ("Springfield Illinois": the Springfield in Illinois; "Shibuya … Tokyo"); then each name's
    own best place, longer phrases first ("New York" before "York"), then the more populous
    ("Rua Augusta Lisboa": Lisbon before Augsburg, once called Augusta). A phrase inside a
    longer matched one ("York" in "New York") is no name of its own here, nor is a phrase of
    only words most documents contain ("city", for the places it is an alternate name of)."""
    from geosleuth.gazetteer import get_gazetteer

    gaz = get_gazetteer()
    matches = [
        m
        for m in gaz.match_names(" ".join(words))
        if m.place.kind != "country" and any(w in rare for w in m.text.split())
    ]
    matches = [
        m
        for m in matches
        if not any(
            o.start <= m.start and m.end <= o.end and o.end - o.start > m.end - m.start for o in matches
        )
    ]
    places = [p for p in _agreed(gaz, [m.text for m in matches])]
    places += [m.place for m in sorted(matches, key=lambda m: (-(m.end - m.start), -m.place.population))]
    hits = []
    for place in places:
        title, body, url, _ = place_document(place)
        hits.append(SearchHit(title=title, url=url, snippet=body))
    return hits


def _agreed(gaz: object, names: list[str]) -> list[Place]:
    """The first place the names resolve to as an address (either order) whose region or country
    is another of the names; none when they do not agree ("Augusta" and "Lisboa")."""
    from geosleuth.core.countries import country_name

    if len(names) < 2:
        return []
    for order in (names, names[::-1]):
        for place in gaz.search(", ".join(order), limit=10):  # type: ignore[attr-defined]
            own = normalize(place.name)
            wider = {normalize(place.admin1 or ""), normalize(country_name(place.country_code or "") or "")}
            if any(n != own and n in wider for n in names):
                return [place]
    return []
