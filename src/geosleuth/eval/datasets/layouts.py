"""The standard benchmarks' files as they are distributed, recognised by name and shape.

Each layout turns its files into plain rows for a row adapter of ``eval.adapters`` and names
itself, so ``geosleuth datasets validate`` can say which one it found. Nothing here reads an
image or goes online; a file that is not the layout it looks like yields error rows, which the
loader reports as bad rows.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.bounds.textrows import csv_records
from geosleuth.scoring.columns import PLACES365_2018_HEADER
from geosleuth.scoring.geoguessr_map_files import image_rows, map_bounds, read_metadata
from geosleuth.scoring.io import ScoreInputError

Rows = Callable[[], Iterator[dict[str, Any]]]

MAX_INFO_BYTES = 512 * 1024 * 1024
"""Cap on ``info.json`` (IM2GPS's is a few MB): it is one JSON object, read whole."""

MAX_LINE_CHARS = 1 << 20
"""Cap on one ``info.txt`` line (YFCC100M lines are a few hundred characters)."""

MP16_LEVELS = ("neighbourhood", "city", "county", "state", "region", "country", "continent")


class LayoutError(ValueError):
    """A file that names a known layout cannot be read as that layout."""


@dataclass(frozen=True)
class Layout:
    """One distributed benchmark layout found on disk."""

    name: str  # shown by `datasets validate`
    format: str  # the row adapter of eval.adapters
    table: Path  # the file the rows come from
    images: Path | None = None  # the image folder the layout implies (None: the loader's default)
    rows: Rows | None = None  # None: the table is an ordinary CSV / TSV / JSON / JSONL file
    parts: tuple[Layout, ...] = field(default=())  # a release of several tables (EarthWhere)
    shards: tuple[Path, ...] = field(default=())  # a hub split's parquet files, read in order


EXPECTED: dict[str, str] = {
    "generic": "id (id, sample_id, …), image (image, image_path, file_name, …), latitude (lat, "
    "latitude, LAT), longitude (lon, lng, longitude, LON), optional country / admin1 / city …",
    "im2gps3k / yfcc4k (*_places365.csv)": "IMG_ID, LAT, LON (GeoEstimation: IMG_ID, AUTHOR, LAT, LON, "
    "S3_Label, …)",
    "im2gps info.json (OSV-5M baseline)": '{"<file name>": [..., "latitude: X", "longitude: Y", _, _]}',
    "yfcc info.txt (OSV-5M baseline)": "tab-separated lines: photo id x[1], longitude x[12], latitude x[13]",
    "osv5m (hub test.csv)": "id, latitude, longitude, country, region, sub-region, city or their "
    "unique_* columns",
    "mp16pro": "IMG_ID, LAT, LON, neighbourhood, city, county, state, region, country, continent",
    "greval (GREval-Bench.json)": "sample_id, image_path, gt_lat, gt_lon (gt_cot)",
    "geobench (GeoVistaBench)": "metadata {uid, location {lat, lng}, multi_level_loc_dict}, raw_image_path",
    "geobench (ccmdi's GeoGuessr maps)": 'metadata.json {"bounds": {"min", "max"}, "images": [{image_path, '
    "country, lat, lng}]}",
    "wherecountry": "nation, panoID, options, answer-type",
    "wherestreet": "BVID, key_clues, answer, answer_type, hint",
}
"""What each format reads, for the error a layout yielding no sample raises."""


FLICKR = ("flickr.com", "flic.kr", "staticflickr.com")
SOURCE_HOSTS: dict[str, tuple[str, ...]] = {
    "im2gps3k": FLICKR,
    "yfcc4k": (*FLICKR, "yfcc100m.appspot.com", "multimediacommons.wordpress.com"),
    "mp16pro": FLICKR,
    "osv5m": ("mapillary.com",),
    "wherestreet": ("bilibili.com", "b23.tv"),
}
"""The sites each format's photos were taken from, by row adapter: a search result on one of
them may be the sample's own page (its geotag, its caption). The leak guard drops them in
benchmark runs; ``leak_hosts`` in the eval config adds more (for generic or Hugging Face data)."""


def expected_text() -> str:
    return "; ".join(f"{name}: {columns}" for name, columns in EXPECTED.items())


# ----------------------------------------------------------------------------- readers


def info_json_rows(path: Path) -> Iterator[dict[str, Any]]:
    """OSV-5M's ``Baseline.load_im2gps``: file name -> list; [-4] is "latitude: X", [-3] "longitude: Y".

    The released loader skips a file whose list is empty; here it is a bad row, named.
    """
    if path.stat().st_size > MAX_INFO_BYTES:
        raise LayoutError(f"{path}: larger than {MAX_INFO_BYTES // 2**20} MiB")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise LayoutError(f"{path}: not a JSON object: {exc}") from exc
    if not isinstance(data, dict):
        raise LayoutError(f"{path}: expected an object of file name -> list, found {type(data).__name__}")
    for name, values in data.items():
        if not isinstance(values, list) or len(values) < 4:
            yield {"__error__": f"{name}: no 'latitude: X', 'longitude: Y' entries at [-4], [-3]"}
            continue
        lat, lon = _prefixed(values[-4], "latitude:"), _prefixed(values[-3], "longitude:")
        if lat is None or lon is None:
            yield {"__error__": f"{name}: entries [-4], [-3] are {values[-4]!r}, {values[-3]!r}"}
            continue
        yield {"IMG_ID": str(name), "LAT": lat, "LON": lon}


def _prefixed(value: Any, prefix: str) -> str | None:
    text = str(value).strip()
    return text[len(prefix) :].strip() if text.lower().startswith(prefix) else None


def info_txt_rows(path: Path) -> Iterator[dict[str, Any]]:
    """OSV-5M's ``Baseline.load_yfcc4k``: tab-separated, photo id x[1], longitude x[12], latitude x[13]."""
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE_CHARS), ""), start=1):
            if len(line) >= MAX_LINE_CHARS and not line.endswith("\n"):
                while (rest := handle.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                    pass  # the rest of an overlong line
                yield {"__error__": f"line {number} is longer than {MAX_LINE_CHARS} characters"}
                continue
            if not line.strip():
                continue
            x = line.rstrip("\r\n").split("\t")
            if len(x) < 14:
                found = f"line {number} has {len(x)} tab-separated fields"
                yield {"__error__": f"{found}; info.txt rows have 14 or more"}
                continue
            yield {"IMG_ID": f"{x[1]}.jpg", "LAT": x[13], "LON": x[12]}


def swapped_places365_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The 2018 header names LON, LAT where the values are latitude, longitude: read them by position."""
    for _, row, problem in csv_records(path):
        yield {"__error__": problem} if row is None else {**row, "LAT": row.get("LON"), "LON": row.get("LAT")}


def geoguessr_map_rows(path: Path) -> Iterator[dict[str, Any]]:
    """ccmdi's GeoBench ``metadata.json``: one row per image, id its file stem (GeoBench's
    ``Location.id``), with the map's bounds (min lat, min lng, max lat, max lng) on every row."""
    try:
        data = read_metadata(path)
        bounds = map_bounds(path)
    except ScoreInputError as exc:
        raise LayoutError(str(exc)) from None
    corners = [bounds.min_lat, bounds.min_lng, bounds.max_lat, bounds.max_lng]
    for row in image_rows(data):
        yield row if "__error__" in row else {**row, "map_bounds": corners, "data_source": "geoguessr_map"}


def _is_geoguessr_map(path: Path) -> bool:
    """A ``metadata.json`` whose opening names GeoBench's ``bounds`` and ``images`` keys."""
    try:
        with path.open(encoding="utf-8") as handle:
            head = handle.read(1 << 16)
    except (OSError, UnicodeDecodeError):
        return False
    return '"bounds"' in head and '"images"' in head


# ----------------------------------------------------------------------------- detection


def _header(path: Path) -> list[str]:
    """The column names of a CSV / TSV table, or the keys of the first JSON / JSONL row."""
    try:
        if path.suffix.lower() in (".csv", ".tsv"):
            with path.open(encoding="utf-8-sig", newline="") as handle:
                return next(csv.reader(handle, delimiter="\t" if path.suffix.lower() == ".tsv" else ","), [])
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            with path.open(encoding="utf-8") as handle:
                first = next((line for line in handle if line.strip()), "")
            row = json.loads(first) if first else {}
            return list(row) if isinstance(row, dict) else []
    except (OSError, ValueError, RecursionError, csv.Error):  # ValueError: not UTF-8, not JSON, a huge int
        return []
    return []


def table_layout(table: Path) -> Layout | None:
    """A layout named by a table's file name and header (None: an ordinary table)."""
    name = table.name.lower()
    if name == "metadata.json" and _is_geoguessr_map(table):
        return Layout(
            "GeoBench GeoGuessr map (ccmdi: metadata.json with bounds and images)",
            "geobench",
            table,
            images=table.parent,
            rows=lambda: geoguessr_map_rows(table),
        )
    header = _header(table)
    columns = set(header)
    if name.endswith("_places365.csv") or name.startswith("mp16_pro"):
        if tuple(header[: len(PLACES365_2018_HEADER)]) == PLACES365_2018_HEADER:
            return Layout(
                f"{table.name} (GeoEstimation 2018 header: LON/LAT names swapped, read by position)",
                "im2gps3k",
                table,
                rows=lambda: swapped_places365_rows(table),
            )
        if {"IMG_ID", "LAT", "LON"} <= columns and {"city", "state", "country"} <= columns:
            return Layout(f"MP16-Pro ({table.name})", "mp16pro", table)
        if {"IMG_ID", "LAT", "LON"} <= columns:
            bench = "YFCC" if name.startswith("yfcc") else "IM2GPS"
            return Layout(
                f"{bench} places365 ({table.name})", "yfcc4k" if bench == "YFCC" else "im2gps3k", table
            )
    if {"id", "latitude", "longitude"} <= columns and any(c.startswith("unique_") for c in columns):
        images = table.parent / "images" / "test"
        return Layout(
            f"OSV-5M hub ({table.name} with unique_* columns)",
            "osv5m",
            table,
            images=images if images.is_dir() else None,
        )
    if name == "wherecountry_500.csv":
        return Layout("EarthWhere WhereCountry (wherecountry_500.csv)", "wherecountry", table)
    if name == "all.csv" and "BVID" in columns:
        return Layout("EarthWhere WhereStreet (all.csv)", "wherestreet", table)
    return None


def folder_layout(folder: Path) -> Layout | None:
    """A release folder recognised by the files the authors ship in it."""
    if (folder / "info.json").is_file():
        info = folder / "info.json"
        return Layout(
            "IM2GPS info.json (OSV-5M baseline)", "im2gps3k", info, rows=lambda: info_json_rows(info)
        )
    if (folder / "info.txt").is_file():
        txt = folder / "info.txt"
        return Layout("YFCC info.txt (OSV-5M baseline)", "yfcc4k", txt, rows=lambda: info_txt_rows(txt))
    where = [folder / "wherecountry" / "wherecountry_500.csv", folder / "wherestreet" / "all.csv"]
    if all(p.is_file() for p in where):
        parts = tuple(p for p in (table_layout(t) for t in where) if p is not None)
        return Layout("EarthWhere (WhereCountry + WhereStreet)", "earthwhere", folder, parts=parts)
    for known in ("GREval-Bench.json", "bench_data/GREval-Bench.json"):
        if (folder / known).is_file():
            return Layout(f"GREval-Bench ({known})", "greval", folder / known)
    for known in ("wherecountry_500.csv", "all.csv", "test.csv", "metadata.json"):
        if (folder / known).is_file() and (found := table_layout(folder / known)) is not None:
            return found
    tables = sorted({*folder.glob("*_places365.csv"), *folder.glob("MP16_Pro*.csv")})
    if len(tables) == 1:
        return table_layout(tables[0])
    return None


def hub_layout(folder: Path, split: str | None) -> Layout | None:
    """A Hugging Face hub snapshot: parquet under ``data/<split>/`` (GeoVistaBench) or named
    ``data/<split>-NNNNN-of-NNNNN.parquet`` (GeoBench); the rows' relative paths are the snapshot's."""
    data = folder / "data"
    if not data.is_dir():
        return None
    by_split: dict[str, list[Path]] = {}
    for file in sorted(data.rglob("*.parquet")):
        parts = file.relative_to(data).parts
        by_split.setdefault(parts[0] if len(parts) > 1 else file.stem.split("-", 1)[0], []).append(file)
    if not by_split:
        return None
    chosen = split or ("test" if "test" in by_split else next(iter(by_split)) if len(by_split) == 1 else None)
    if chosen not in by_split:
        raise LayoutError(
            f"{folder}: a hub snapshot with splits {', '.join(by_split)}; choose one with --split"
        )
    files = by_split[chosen]
    shown = files[0].relative_to(folder) if len(files) == 1 else f"{len(files)} parquet shards"
    return Layout(
        f"Hugging Face hub snapshot (split {chosen}: {shown})",
        "hf",
        files[0],
        images=folder,
        shards=tuple(files),
    )
