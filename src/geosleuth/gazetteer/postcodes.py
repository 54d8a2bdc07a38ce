"""Postcodes offline: an index built from the ``countrystatecity-postal-codes`` package (the
``postcodes`` extra), and the postcodes a text reads in the countries its other evidence names.

The package lists about 844,000 postcodes of 125 countries with their locality; some countries
carry a centroid per postcode (US, AU, PL, BE, DK, CA, BR, ...), the others none (CH, DE, FR,
JP, ...). The build keeps the package's centroid where there is one and otherwise gives the
postcode its locality's GeoNames place, matched by name in that country (and state when two
places share the name); each row says which it is and how fine: a centroid's radius is the
distance to the nearest other postcode's centroid, a locality's is that place's own circle (its
population; the caller draws it as it draws a named city). A locality with no GeoNames match
gets no row: its coordinates are absent, not guessed.

The index is one SQLite file beside the gazetteer it was matched against (whose directory is
versioned by its own packages), named for this build's schema and the package's version, so
either changing rebuilds it; it is written to a temporary name and renamed into place.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
import os
import re
import sqlite3
import sys
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np

from geosleuth.bounds.extras import install_line
from geosleuth.core.geo import haversine_km, to_unit_vectors
from geosleuth.core.text import normalize
from geosleuth.gazetteer.address import MAX_ADDRESS_CHARS, name_variants, postcode_tokens

log = logging.getLogger(__name__)

PACKAGE = "countrystatecity-postal-codes"
MODULE = "countrystatecity_postal_codes"
SCHEMA_VERSION = 3  # bump when the table layout or the matching rules change
INSTALL_HINT = install_line("postcodes")

CENTROID = "package centroid"
LOCALITY = "locality match"
MIN_CENTROID_KM = 2.0
MAX_CENTROID_KM = 25.0
"""A postcode centroid's circle: the distance to the nearest other postcode's centroid, in these
bounds (a city-centre code a block wide still gets two kilometres: its centroid is often a kilometre
or more from a building in it; a rural one at most 25 km)."""
MAX_AREA_KM = 150.0
"""The same for a postcode area or a Canadian FSA (the package's "area"/"fsa" rows), which
cover a whole district: the nearest other area is farther, up to this."""
DISTRICT_KM = 30.0
"""A district named inside a locality ("Graz, 02.Bez.:Sankt Leonhard") is used only when its
place lies this close to the locality's own ("Graz"); else the locality's place stands."""
MAX_TEXT_LINES = 200
_COMPONENTS = re.compile(r"[,:;/()]+")
_NOTES = re.compile(r"[（(][^（）()]*[）)]")
_KANA_HAN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")
_CJK_UNIT = re.compile(r"[^市区町村郡\s]+?[市区町村郡]")
"""A Japanese municipality or ward as the package writes it, no prefecture first: "京都市下京区西七条"
is 京都市, 下京区 (and a neighbourhood the gazetteer does not hold)."""
_HAS_DIGIT = re.compile(r"\d")


@dataclass(frozen=True)
class PostcodeRecord:
    """One postcode of one locality, with where its point came from and how fine it is."""

    country_code: str
    code: str
    locality: str | None
    state: str | None
    lat: float
    lon: float
    source: str  # `CENTROID` or `LOCALITY`
    radius_km: float | None  # a centroid's circle; None for a locality match (its place's circle)
    population: int | None  # the matched place's population (locality matches)
    place: str | None  # the matched GeoNames place's name (locality matches)
    admin1: str | None  # the matched place's admin-1 name (locality matches)

    def named_in(self, line: str) -> bool:
        """The line the postcode stands on also names its locality, its place or its state
        ("6004 Luzern", "New York, NY 10118"): the postcode is read beside the place it belongs to."""
        names = [self.place, self.locality, *_components(self.locality or "")[:1]]
        if any(written_in(normalize(_drop_numbers(name or "")), line) for name in names):
            return True
        return (
            bool(self.state)
            and self.state.isalpha()
            and re.search(rf"\b{re.escape(self.state)}\b", line) is not None
        )


def written_in(key: str, line: str) -> bool:
    """A normalised name stands in a line: as whole words, or anywhere for Japanese and Chinese,
    written without spaces ("京都市" in "〒600-8216 京都市下京区")."""
    if len(key) < 2 or (len(key) < 3 and not _KANA_HAN.search(key)):
        return False
    if _KANA_HAN.search(key):
        return key in normalize(line)
    return f" {key} " in f" {normalize(line)} "


@dataclass(frozen=True)
class PostcodeRead:
    """A postcode found in a text: as written, the code the index knew it by, and its rows."""

    written: str
    code: str
    country_code: str
    line: str
    records: tuple[PostcodeRecord, ...]


def package_version() -> str | None:
    """The installed package's version; None when the ``postcodes`` extra is not installed."""
    try:
        return version(PACKAGE)
    except PackageNotFoundError:
        return None


def package_data_dir() -> Path | None:
    """The package's ``data`` folder (countries.json, by-country/XX/postcodes.json), found
    without importing it."""
    spec = importlib.util.find_spec(MODULE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def index_path(gazetteer_dir: Path, package: str) -> Path:
    return Path(gazetteer_dir) / f"postcodes-schema{SCHEMA_VERSION}-{PACKAGE}-{package}.sqlite"


def ensure_built(
    gazetteer_dir: Path, data_dir: Path | None = None, package: str | None = None
) -> Path | None:
    """The postcode index beside ``gazetteer_dir``, built first if needed; None without the package.

    ``data_dir``/``package`` name another copy of the package's data layout and its version
    (tests); by default the installed package's.
    """
    package = package or package_version()
    data_dir = data_dir or package_data_dir()
    if package is None or data_dir is None:
        return None
    target = index_path(gazetteer_dir, package)
    if target.exists():
        return target
    sys.stderr.write(f"geosleuth: building the postcode index {target.name} (once per gazetteer)\n")
    sys.stderr.flush()
    fd, tmp_name = tempfile.mkstemp(prefix=".postcodes-build-", suffix=".sqlite", dir=gazetteer_dir)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        tmp.unlink()
        counts = build_index(data_dir, Path(gazetteer_dir) / "places.sqlite", tmp, package)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    for stale in Path(gazetteer_dir).glob("postcodes-schema*.sqlite"):  # an older schema or package's
        if stale != target:
            stale.unlink(missing_ok=True)
    log.info("postcode index %s: %s", target, counts)
    return target


def build_index(data_dir: Path, places_db: Path, out: Path, package: str) -> dict[str, int]:
    """Write the postcode index to ``out`` from the package's data layout and the gazetteer's
    places; returns how many postcodes got a centroid, a locality match, or nothing."""
    formats = _read_formats(data_dir / "countries.json")
    places = sqlite3.connect(f"file:{places_db}?mode=ro", uri=True)
    matcher = _LocalityMatcher(places)
    rows: list[tuple[Any, ...]] = []
    counts = {CENTROID: 0, LOCALITY: 0, "unmatched": 0}
    for cc_dir in sorted(p for p in (data_dir / "by-country").iterdir() if p.is_dir()):
        cc = cc_dir.name.upper()
        records = json.loads((cc_dir / "postcodes.json").read_text(encoding="utf-8"))
        centroids = _centroid_rows(cc, records)
        rows += centroids
        counts[CENTROID] += len(centroids)
        for rec in _unique(r for r in records if r.get("latitude") is None or r.get("longitude") is None):
            place = matcher.match(cc, rec.get("localityName") or "", rec.get("stateCode"))
            if place is None:
                counts["unmatched"] += 1
                continue
            counts[LOCALITY] += 1
            rows.append((cc, code_key(rec["code"]), rec.get("localityName"), rec.get("stateCode"),
                         place[1], place[2], LOCALITY, None, place[4], place[0], place[3]))  # fmt: skip
    places.close()
    db = sqlite3.connect(out)
    db.executescript(
        """
        CREATE TABLE postcodes (cc TEXT, code TEXT, locality TEXT, state TEXT, lat REAL, lon REAL,
                                source TEXT, radius_km REAL, population INTEGER, place TEXT, admin1 TEXT);
        CREATE TABLE formats (cc TEXT PRIMARY KEY, regex TEXT);
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT);
        """
    )
    db.executemany("INSERT INTO postcodes VALUES (?,?,?,?,?,?,?,?,?,?,?)", sorted(rows, key=lambda r: r[:3]))
    db.executemany("INSERT INTO formats VALUES (?,?)", sorted(formats.items()))
    meta = {
        "package": f"{PACKAGE} {package}",
        "schema": str(SCHEMA_VERSION),
        **{k: str(v) for k, v in counts.items()},
    }
    db.executemany("INSERT INTO meta VALUES (?,?)", sorted(meta.items()))
    db.executescript("CREATE INDEX postcodes_key ON postcodes(cc, code); ANALYZE;")
    db.commit()
    db.close()
    return counts


def code_key(code: str) -> str:
    """A postcode as the index keys it: upper case, inner spaces single."""
    return " ".join(code.upper().split())


def _read_formats(path: Path) -> dict[str, str]:
    """Country -> the package's validation regex, for those that compile."""
    out = {}
    for c in json.loads(path.read_text(encoding="utf-8")):
        regex = c.get("postalCodeRegex")
        if not regex:
            continue
        try:
            re.compile(regex)
        except re.error:
            log.warning(
                "skipping the postcode format of %s: %r does not compile", c.get("countryCode"), regex
            )
            continue
        out[str(c["countryCode"]).upper()] = regex
    return out


def _unique(records: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    for r in records:
        key = (code_key(r["code"]), r.get("localityName") or "")
        if key not in seen:
            seen.add(key)
            yield r


def _centroid_rows(cc: str, records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """One row per (postcode, locality) with the package's centroid (the mean where a code has
    several points, as Polish street rows do), each with its nearest-neighbour radius."""
    from scipy.spatial import cKDTree

    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r.get("latitude") is not None and r.get("longitude") is not None:
            groups[(code_key(r["code"]), r.get("localityName") or "")].append(r)
    if not groups:
        return []
    keys = list(groups)
    lat = np.array([np.mean([float(r["latitude"]) for r in groups[k]]) for k in keys])
    lon = np.array([np.mean([float(r["longitude"]) for r in groups[k]]) for k in keys])
    codes = np.array([k[0] for k in keys], dtype=object)
    coarse = np.array([groups[k][0].get("type") in ("area", "fsa") for k in keys])
    nearest = np.full(len(keys), np.inf)
    if len(keys) > 1:
        k = min(len(keys), 16)
        vectors = to_unit_vectors(lat, lon)
        _, idx = cKDTree(vectors).query(vectors, k=k)
        idx = idx.reshape(len(keys), k)
        for i in range(len(keys)):
            others = [j for j in idx[i] if codes[j] != codes[i]]
            if others:
                nearest[i] = float(haversine_km(lat[i], lon[i], lat[others[0]], lon[others[0]]))
    rows = []
    for i, (code, locality) in enumerate(keys):
        top = MAX_AREA_KM if coarse[i] else MAX_CENTROID_KM
        radius = top if math.isinf(nearest[i]) else min(top, max(MIN_CENTROID_KM, nearest[i]))
        rows.append((cc, code, locality or None, groups[(code, locality)][0].get("stateCode"),
                     float(lat[i]), float(lon[i]), CENTROID, round(radius, 2), None, None, None))  # fmt: skip
    return rows


def _components(locality: str) -> list[str]:
    """A locality's parts, the locality first: split on punctuation, parenthesised notes
    dropped ("（１〜４丁目）"), a Japanese address cut into its municipality and ward."""
    out: list[str] = []
    for part in _COMPONENTS.split(_NOTES.sub(" ", locality)):
        out += _CJK_UNIT.findall(part) if _KANA_HAN.search(part) else [part]
    return out


def _drop_numbers(name: str) -> str:
    return " ".join(w for w in name.split() if not _HAS_DIGIT.search(w))


class _LocalityMatcher:
    """A package locality to its GeoNames place in one country: the whole name, else its first
    component, with a named district preferred when it lies within `DISTRICT_KM` of that."""

    def __init__(self, places: sqlite3.Connection) -> None:
        self.db = places
        self._cache: dict[tuple[str, str, str | None], tuple[Any, ...] | None] = {}
        self._states: dict[tuple[str, str], set[str]] = {}
        self._iso_names: dict[str, list[str]] | None = None

    def match(self, cc: str, locality: str, state: str | None) -> tuple[Any, ...] | None:
        """(name, lat, lon, admin1, population) of the locality's place, or None."""
        key = (cc, locality, state)
        if key not in self._cache:
            self._cache[key] = self._match(cc, locality, state)
        return self._cache[key]

    def _match(self, cc: str, locality: str, state: str | None) -> tuple[Any, ...] | None:
        words = _drop_numbers(locality).split()
        if state and len(words) > 1 and words[-1] == state:  # "Renens VD": the canton told apart
            words = words[:-1]
        whole = self._place(cc, normalize(" ".join(words)), state)
        if whole is not None:
            return whole
        parts = [normalize(_drop_numbers(p)) for p in _components(locality)]
        parts = [p for p in parts if p]
        if not parts:
            return None
        head = self._place(cc, parts[0], state)
        for part in reversed(parts[1:]):
            district = self._place(cc, part, state)
            if district is None:
                continue
            if head is None or float(haversine_km(head[1], head[2], district[1], district[2])) <= DISTRICT_KM:
                return district
        return head

    def _place(self, cc: str, key: str, state: str | None) -> tuple[Any, ...] | None:
        if len(key) < 2:
            return None
        rows: list[tuple[Any, ...]] = []
        for variant in [key, *name_variants(key)]:  # "st sulpice" -> "saint sulpice"
            rows = self.db.execute(
                "SELECT p.name, p.lat, p.lon, p.admin1, p.population, n.is_primary FROM names n "
                "JOIN places p ON p.idx = n.idx WHERE n.key = ? AND p.cc = ? AND p.kind = 'city'",
                (variant, cc),
            ).fetchall()
            if rows:
                break
        if not rows:
            return None
        state_names = self._state_names(cc, state) if state else set()
        best = max(rows, key=lambda r: (normalize(r[3] or "") in state_names, r[5], r[4] or 0))
        return best[:5]

    def _state_names(self, cc: str, state: str) -> set[str]:
        """Normalised names of an ISO 3166-2 subdivision ("DE-SN": sachsen, saxe, ...) and of the
        gazetteer's admin-1 region that answers to one of them ("Saxony", its places' admin1)."""
        key = (cc, state)
        if key not in self._states:
            if self._iso_names is None:
                from geosleuth.data import iso3166_2_names

                self._iso_names = iso3166_2_names()
            names = {normalize(n) for n in self._iso_names.get(f"{cc}-{state}", [])}
            names.discard("")
            marks = ",".join("?" * len(names))
            regions = (
                self.db.execute(
                    "SELECT DISTINCT p.name FROM names n JOIN places p ON p.idx = n.idx "
                    f"WHERE p.kind = 'admin1' AND p.cc = ? AND n.key IN ({marks})",
                    (cc, *sorted(names)),
                ).fetchall()
                if names
                else []
            )
            self._states[key] = names | {normalize(r[0]) for r in regions}
        return self._states[key]


class PostcodeIndex:
    """Look-ups in a built postcode index (read-only SQLite, one connection per thread)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()

    @property
    def _db(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn

    @cached_property
    def meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    @cached_property
    def _formats(self) -> dict[str, re.Pattern[str]]:
        return {cc: re.compile(regex) for cc, regex in self._db.execute("SELECT cc, regex FROM formats")}

    def lookup(self, country_code: str, code: str) -> list[PostcodeRecord]:
        rows = self._db.execute(
            "SELECT cc, code, locality, state, lat, lon, source, radius_km, population, place, admin1 "
            "FROM postcodes WHERE cc = ? AND code = ?",
            (country_code.upper(), code_key(code)),
        ).fetchall()
        return [PostcodeRecord(*row) for row in rows]

    def read(self, text: str, countries: Iterable[str]) -> list[PostcodeRead]:
        """Postcodes written in ``text`` that are valid in one of ``countries`` (by the package's
        format for that country) and known to the index. A code the index lacks is tried by its
        outward part and its letters ("K1A 0B1" -> "K1A", "SW1A 1AA" -> "SW1A" -> "SW"), the
        coarsest rows some countries have. Bounded: `MAX_ADDRESS_CHARS` characters a line, at
        most `MAX_TEXT_LINES` lines, `postcode_tokens`' cap on tokens a line."""
        wanted = [cc.upper() for cc in dict.fromkeys(countries) if cc and cc.upper() in self._formats]
        out: list[PostcodeRead] = []
        tried: set[tuple[str, str]] = set()
        found: set[tuple[str, str]] = set()
        for line in (text or "").splitlines()[:MAX_TEXT_LINES]:
            line = line[:MAX_ADDRESS_CHARS]
            for token in postcode_tokens(line):
                for cc in wanted:
                    if (cc, token) in tried or not self._formats[cc].fullmatch(token):
                        continue
                    tried.add((cc, token))
                    for code in _coarser(token):
                        records = self.lookup(cc, code)
                        if records:
                            if (cc, code) not in found:
                                found.add((cc, code))
                                out.append(PostcodeRead(token, code, cc, line, tuple(records)))
                            break
        return out


def _coarser(code: str) -> list[str]:
    """The code, its outward part (before a space or a hyphen: "10001-1234" -> "10001"), and a
    leading run of letters."""
    out = [code_key(code)]
    head = re.split(r"[ -]", code_key(code))[0]
    out.append(head)
    letters = re.match(r"[A-Z]+", head)
    if letters and letters.group(0) != head:
        out.append(letters.group(0))
    return list(dict.fromkeys(out))


_indexes: dict[Path, PostcodeIndex | None] = {}
_lock = threading.Lock()


def get_postcode_index(gazetteer_dir: Path) -> PostcodeIndex | None:
    """The process-wide postcode index of a gazetteer, built on first use; None when the
    ``postcodes`` extra is not installed or the index cannot be written beside the gazetteer."""
    key = Path(gazetteer_dir)
    if key in _indexes:
        return _indexes[key]
    with _lock:
        if key not in _indexes:
            try:
                path = ensure_built(key)
            except OSError as exc:
                log.warning("no postcode index beside %s: %s", key, exc)
                path = None
            _indexes[key] = PostcodeIndex(path) if path is not None else None
        return _indexes[key]
