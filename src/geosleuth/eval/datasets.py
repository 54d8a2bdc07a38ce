"""Benchmark loaders: every released layout becomes a list of ``Sample`` records.

Bad rows are reported up front (``DatasetProblem``) instead of surfacing mid-run; nothing is
downloaded here: data lives wherever the user says.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import math
import random
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from geosleuth.core.records import Sample
from geosleuth.core.wherebench import answer_level, hierarchy_labels, hint_level, source_of
from geosleuth.eval.layouts import (
    Layout,
    LayoutError,
    expected_text,
    folder_layout,
    hub_layout,
    table_layout,
)
from geosleuth.textrows import csv_records, text_lines

IMAGE_SUFFIXES: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".gif", ".tif", ".tiff")
CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_IMAGE_BYTES = 64 * 1024 * 1024
"""Cap on one image taken out of a zip part."""
ID_STEM_SUFFIXES: tuple[str, ...] = ("_panoramic",)
"""Image names a release adds to a row id (WhereCountry's ``<panoID>_panoramic.jpg``)."""

_ID_KEYS = ("id", "sample_id", "ID", "IMG_ID", "img_id", "image_id", "panoID", "BVID", "index", "idx")
_IMAGE_KEYS = ("image", "image_path", "img_path", "img", "file", "filename", "file_name", "path")
_LAT_KEYS = ("lat", "latitude", "LAT", "Latitude", "gps_lat")
_LON_KEYS = ("lon", "lng", "longitude", "LON", "Longitude", "gps_lon", "long")
_LEVEL_ALIASES: dict[str, tuple[str, ...]] = {
    "country": ("country", "nation", "country_name"),
    "admin1": ("admin1", "province_or_state", "province", "state", "region"),
    "city": ("city",),
    "admin2": ("admin2", "sub-region", "sub_region", "county", "district", "area"),
    "town": ("town", "subdistrict"),
    "street": ("street",),
    "poi": ("poi",),
}


class DatasetError(Exception):
    """The dataset as a whole cannot be read (missing file, unknown format)."""


@dataclass(frozen=True)
class DatasetProblem:
    """One bad row, reported before any sample runs."""

    row: int  # 0-based index of the data row; shown 1-based
    sample_id: str | None
    problem: str

    def __str__(self) -> str:
        where = f"row {self.row + 1}" + (f" (id {self.sample_id})" if self.sample_id else "")
        return f"{where}: {self.problem}"


@dataclass
class Dataset:
    """Loaded samples plus the rows that were rejected and a content fingerprint."""

    name: str
    source: str
    format: str
    samples: list[Sample]
    problems: list[DatasetProblem] = field(default_factory=list)
    missing_images: list[DatasetProblem] = field(
        default_factory=list
    )  # samples kept; runs record them failed
    layout: str | None = None  # the distributed layout recognised (`datasets validate` names it)

    @property
    def fingerprint(self) -> str:
        return fingerprint_samples(self.samples)


def fingerprint_samples(samples: Iterable[Sample]) -> str:
    """SHA-256 over the samples (sorted by id) and their image file sizes, so edits are caught.

    Images count by file name and size, not folder, so a moved dataset still resumes its runs.
    """
    digest = hashlib.sha256()
    for sample in sorted(samples, key=lambda s: s.id):
        name = Path(sample.image).name if sample.image else None
        digest.update(sample.model_copy(update={"image": name}).model_dump_json().encode())
        if sample.image:
            path = Path(sample.image)
            digest.update(str(path.stat().st_size if path.is_file() else -1).encode())
    return "sha256:" + digest.hexdigest()


# ----------------------------------------------------------------------------- raw rows


def read_rows(path: Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSON / JSONL / CSV / TSV file as dicts (a JSON file holds a list of objects)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        for number, line, problem in text_lines(path):  # a line that is not UTF-8 fails alone
            if line is None:
                yield {"__error__": problem}
                continue
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                yield {"__error__": f"line {number} is not JSON: {exc.msg}"}
                continue
            yield row if isinstance(row, dict) else {"__error__": f"line {number} is not an object"}
    elif suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            data = data.get("data") or data.get("samples") or list(data.values())
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list of objects")
        for row in data:
            yield row if isinstance(row, dict) else {"__error__": "entry is not an object"}
    elif suffix in (".csv", ".tsv"):
        try:
            for _, record, problem in csv_records(path, "\t" if suffix == ".tsv" else ","):
                yield record if record is not None else {"__error__": problem}
        except ValueError as exc:
            raise DatasetError(str(exc)) from None
    else:
        raise DatasetError(f"{path}: unsupported file type {suffix!r} (use .jsonl, .json, .csv or .tsv)")


def _first(row: dict[str, Any], keys: Iterable[str]) -> Any:
    for key in keys:
        value = row.get(key)
        if value not in (None, ""):
            return value
    return None


def _float(value: Any, name: str) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} {value!r} is not a number") from None
    if math.isnan(number):
        return None
    return number


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


class ImageResolver:
    """Turns the image reference of a row into an absolute path: relative to a root, by id, or by stem.

    A relative reference is tried against the image root, then against ``base`` (the table's
    folder, where references such as ``images/a/1.jpg`` are usually relative to); the stem
    index is only a fallback, since two folders can hold images with the same stem. Paths are
    absolute so reports and exports find the images from any working directory.
    """

    def __init__(self, root: Path | None, base: Path | None = None, zip_parts: bool = False) -> None:
        self.root = root
        self.base = base
        self.zip_parts = zip_parts  # look inside released zip parts (OSV-5M) for images not yet extracted
        self._by_stem: dict[str, Path] | None = None
        self._zipped: dict[Path, tuple[Path, str]] = {}

    def _index(self) -> dict[str, Path]:
        if self._by_stem is None:
            self._by_stem = {}
            if self.root is not None and self.root.is_dir():
                for path in self.root.rglob("*"):
                    if path.suffix.lower() in IMAGE_SUFFIXES:
                        self._by_stem.setdefault(path.stem, path)
                    elif self.zip_parts and path.suffix.lower() == ".zip" and path.is_file():
                        self._index_zip(path)
        return self._by_stem

    def _index_zip(self, archive: Path) -> None:
        """Images inside a released zip part (OSV-5M's ``images/test/00.zip`` …), extracted on first use.

        Each member goes where the release's own instructions (``extractall`` into the zip's
        folder) put it; a member whose name would leave that folder is skipped.
        """
        assert self._by_stem is not None
        try:
            with zipfile.ZipFile(archive) as handle:
                members = [m for m in handle.infolist() if Path(m.filename).suffix.lower() in IMAGE_SUFFIXES]
        except (OSError, zipfile.BadZipFile):
            return
        for member in members:
            target = archive.parent / member.filename
            if member.is_dir() or Path(member.filename).is_absolute() or ".." in Path(member.filename).parts:
                continue
            if member.file_size <= MAX_IMAGE_BYTES:
                self._by_stem.setdefault(target.stem, target)
                self._zipped.setdefault(target, (archive, member.filename))

    def _extracted(self, path: Path) -> Path:
        """The image file, taken out of its zip part if it is still inside one."""
        source = self._zipped.get(path)
        if source is None or path.is_file():
            return path
        archive, name = source
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with zipfile.ZipFile(archive) as handle, handle.open(name) as src:
                data = src.read(MAX_IMAGE_BYTES + 1)
            if len(data) <= MAX_IMAGE_BYTES:
                partial = path.with_name(path.name + ".part")
                partial.write_bytes(data)
                partial.replace(path)
        except (OSError, zipfile.BadZipFile, KeyError):
            pass  # stays missing: validation lists it, a run records the sample failed
        return path

    def resolve(self, reference: str | None, sample_id: str) -> str | None:
        if reference:
            ref = Path(reference).expanduser()
            if ref.is_absolute() or self.root is None:
                return str(ref.absolute())
            candidates = [self.root / ref] + ([self.base / ref] if self.base is not None else [])
            for path in candidates:
                if path.is_file():
                    return str(path.absolute())
            found = self._index().get(ref.stem)
            missing = candidates[-1] if len(ref.parts) > 1 else candidates[0]
            return str(self._extracted(found or missing).absolute())
        if self.root is None:
            return None
        index = self._index()
        stem = Path(sample_id).name
        found = next((index[k] for k in (stem, *(stem + s for s in ID_STEM_SUFFIXES)) if k in index), None)
        return str(self._extracted(found).absolute()) if found else None


# ----------------------------------------------------------------------------- row adapters

RowAdapter = Callable[[dict[str, Any], int, ImageResolver], Sample]


def _labels(row: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    nested = row.get("labels")
    if isinstance(nested, dict):
        labels.update({k: str(v) for k, v in nested.items() if v not in (None, "")})
    for level, aliases in _LEVEL_ALIASES.items():
        value = _first(row, aliases)
        if value is not None and level not in labels and not isinstance(value, dict | list):
            labels[level] = str(value)
    return labels


def _sample_id(row: dict[str, Any], index: int) -> str:
    value = _first(row, _ID_KEYS)
    if value is None:
        image = _first(row, _IMAGE_KEYS)
        return Path(str(image)).stem if isinstance(image, str) else str(index)
    return str(value)


def generic_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """Any row with an id, an image reference and coordinates / labels under common names."""
    sample_id = _sample_id(row, index)
    image = _first(row, _IMAGE_KEYS)
    known = set(Sample.model_fields)
    extra = {k: v for k, v in row.items() if k not in known and k not in _LAT_KEYS + _LON_KEYS}
    data = {k: _maybe_json(v) for k, v in row.items() if k in known and v not in (None, "")}
    data.update(
        id=sample_id,
        image=images.resolve(str(image) if image is not None else None, sample_id),
        lat=_float(_first(row, _LAT_KEYS), "latitude"),
        lon=_float(_first(row, _LON_KEYS), "longitude"),
        labels=_labels(row),
    )
    metadata = dict(data.get("metadata") or {})
    metadata.update({k: v for k, v in extra.items() if k not in _ID_KEYS + _IMAGE_KEYS})
    data["metadata"] = metadata
    for key in ("key_clues", "choices"):
        if isinstance(data.get(key), str):
            data[key] = [part.strip() for part in data[key].split("|") if part.strip()]
    if isinstance(data.get("clue_weights"), str):
        data["clue_weights"] = [float(x) for x in data["clue_weights"].split("|") if x.strip()]
    return Sample.model_validate(data)


def im2gps_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """IM2GPS3K / YFCC4K: ``IMG_ID, LAT, LON`` (+ scene labels); the image is named by IMG_ID."""
    image_id = str(_first(row, ("IMG_ID", "img_id", "id", "image")) or index)
    scene = {k: v for k, v in row.items() if k not in ("IMG_ID", "LAT", "LON", "AUTHOR")}
    return Sample(
        id=Path(image_id).stem,
        image=images.resolve(image_id, image_id),
        lat=_float(_first(row, ("LAT", "lat", "latitude")), "latitude"),
        lon=_float(_first(row, ("LON", "lon", "longitude")), "longitude"),
        metadata=scene,
    )


def osv5m_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """OSV-5M test CSV: ``id, latitude, longitude, country, region, sub-region, city, …``."""
    sample_id = str(row.get("id") or index)
    labels: dict[str, str] = {}
    for level, key in (
        ("country", "country"),
        ("admin1", "region"),
        ("admin2", "sub-region"),
        ("city", "city"),
    ):
        value = row.get(key)
        if value in (None, ""):
            value = _unique_name(row.get(f"unique_{key}"))
        if value not in (None, "", "NaN"):
            labels[level] = str(value)
    skip = {"id", "latitude", "longitude", "country", "region", "sub-region", "city"}
    return Sample(
        id=sample_id,
        image=images.resolve(None, sample_id),
        lat=_float(row.get("latitude"), "latitude"),
        lon=_float(row.get("longitude"), "longitude"),
        labels=labels,
        split="test",
        data_source="osv5m",
        metadata={k: v for k, v in row.items() if k not in skip},
    )


def _unique_name(unique: Any) -> str | None:
    """The level's own name in the hub's ``unique_*`` value: its first part, as the release joins
    them from the left (``city_sub-region_region_country``: ``Waitangi_NaN_Chatham Islands_NZ``);
    ``NaN`` there means the release has no name at that level."""
    if unique in (None, ""):
        return None
    name = str(unique).split("_", 1)[0].strip()
    return None if name in ("", "NaN", "nan") else name


def geobench_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """GeoBench-style: metadata JSON with a location and ``{country, province_or_state, city}``."""
    meta = _maybe_json(row.get("metadata")) or {}
    if not isinstance(meta, dict):
        raise ValueError("metadata is not a JSON object")
    location = _maybe_json(meta.get("location") or row.get("location")) or {}
    if isinstance(location, list | tuple) and len(location) == 2:
        location = {"lat": location[0], "lon": location[1]}
    if not isinstance(location, dict):
        raise ValueError("location is neither an object nor a [lat, lon] pair")
    levels = meta.get("multi_level_loc_dict")  # GeoVistaBench on the hub
    merged = {**row, **meta, **location, **(levels if isinstance(levels, dict) else {})}
    uid = meta.get("uid") or row.get("uid")
    sample_id = str(uid) if uid not in (None, "") else _sample_id(row, index)
    data_type = _first(merged, ("data_type", "type", "image_type"))
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, (*_IMAGE_KEYS, "raw_image_path")), sample_id),
        lat=_float(_first(merged, _LAT_KEYS), "latitude"),
        lon=_float(_first(merged, _LON_KEYS), "longitude"),
        labels=_labels(merged),
        data_source=str(row.get("data_source") or "geobench"),
        metadata={"data_type": data_type} if data_type else {},
    )


def map_bench_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """Map-benchmark rows ``{image, latitude, longitude, city, country}``."""
    sample_id = _sample_id(row, index)
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, _IMAGE_KEYS), sample_id),
        lat=_float(_first(row, _LAT_KEYS), "latitude"),
        lon=_float(_first(row, _LON_KEYS), "longitude"),
        labels={k: str(row[k]) for k in ("city", "country") if row.get(k) not in (None, "")},
        split=row.get("split"),
        data_source=row.get("data_source"),
    )


def mp16pro_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """MP16-Pro (G3): ``IMG_ID, LAT, LON`` + Nominatim levels (neighbourhood, city, county, state, region,
    country, continent); ``IMG_ID`` is a relative path (``e4/3a/123.jpg``), G3 names the file with
    ``/`` replaced by ``_``."""
    image_id = str(_first(row, ("IMG_ID", "img_id")) or index)
    flat = image_id.replace("/", "_")
    labels = {
        level: str(row[key])
        for level, key in (
            ("country", "country"),
            ("admin1", "state"),
            ("admin2", "county"),
            ("city", "city"),
        )
        if row.get(key) not in (None, "")
    }
    image = images.resolve(image_id, Path(flat).stem)
    if not Path(image or "").is_file():
        image = images.resolve(flat, Path(flat).stem) or image
    skip = {"IMG_ID", "LAT", "LON", "country", "state", "county", "city"}
    return Sample(
        id=Path(flat).stem,
        image=image,
        lat=_float(row.get("LAT"), "latitude"),
        lon=_float(row.get("LON"), "longitude"),
        labels=labels,
        data_source="mp16pro",
        metadata={k: v for k, v in row.items() if k not in skip and v not in (None, "")},
    )


def greval_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """GREval-Bench JSON: ``sample_id, image_path, gt_cot, gt_lat, gt_lon``."""
    sample_id = str(_first(row, ("sample_id", "id")) or index)
    extra = {k: v for k, v in row.items() if k not in ("sample_id", "image_path", "gt_lat", "gt_lon")}
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, ("image_path", "image")), sample_id),
        lat=_float(row.get("gt_lat"), "gt_lat"),
        lon=_float(row.get("gt_lon"), "gt_lon"),
        labels=_labels(row),
        data_source="greval",
        metadata=extra,
    )


MAX_LITERAL_CHARS = 20_000
"""Cap on a list cell (Python literal or JSON) before it is parsed."""


def _list_cell(value: Any, name: str) -> list[Any] | None:
    """A list from a JSON or Python-literal cell (``"['Italy', 'San Marino']"``) or ``|``-separated text."""
    if value is None or isinstance(value, list):
        return value
    text = str(value).strip()
    if not text:
        return []
    if text[:1] != "[":
        return [part.strip() for part in text.split("|") if part.strip()]
    if len(text) > MAX_LITERAL_CHARS:
        raise ValueError(f"{name} cell longer than {MAX_LITERAL_CHARS} characters")
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        try:
            parsed = ast.literal_eval(text)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            raise ValueError(f"{name} {text[:80]!r} is neither a JSON nor a Python list") from None
    if not isinstance(parsed, list | tuple):
        raise ValueError(f"{name} is not a list")
    return list(parsed)


def where_country_row(row: dict[str, Any], index: int, images: ImageResolver, seed: int = 0) -> Sample:
    """WhereCountry: the nation plus three distractors, shuffled into A–D by (seed, id).

    Released layout ``nation,panoID,options,answer-type``: ``options`` is a Python-literal list
    of the three distractors and the image is named by ``panoID`` (``<panoID>.jpg`` or the
    released ``<panoID>_panoramic.jpg``).
    """
    sample_id = str(_first(row, ("panoID", "pano_id", *_ID_KEYS)) or _sample_id(row, index))
    nation = _first(row, ("nation", "country", "answer"))
    distractors = _list_cell(_first(row, ("distractors", "options", "wrong_options")), "options")
    if distractors is None:
        distractors = [row[k] for k in ("distractor1", "distractor2", "distractor3") if row.get(k)]
    if not nation:
        raise ValueError("no nation / answer")
    if len(distractors) not in (2, 3):  # two released rows offer two distractors (a 3-way question)
        raise ValueError(f"expected 3 distractors, got {distractors!r}")
    options = [str(nation), *(str(d) for d in distractors)]
    if len(set(options)) != len(options):
        raise ValueError(f"options are not distinct: {options}")
    random.Random(f"{seed}:{sample_id}").shuffle(options)
    extra = {k: v for k, v in row.items() if k in ("answer-type", "answer_type") and v}
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, _IMAGE_KEYS), sample_id),
        lat=_float(_first(row, _LAT_KEYS), "latitude"),
        lon=_float(_first(row, _LON_KEYS), "longitude"),
        labels={"country": str(nation)},
        answer_type="choice",
        choices=options,
        answer=CHOICE_LETTERS[options.index(str(nation))],
        data_source="wherecountry",
        metadata=extra,
    )


_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2012": "-", "\u2014": "-"})


def _coordinate_answer(text: str) -> tuple[float, float]:
    """``"16.0993, 108.2768"`` or ``"(23.70, 113.07)"`` → (lat, lon); typographic minus signs are read."""
    parts = [p.strip(" ()[]") for p in text[:200].translate(_MINUS_SIGNS).split(",")]
    if len(parts) != 2:
        raise ValueError(f"coordinate answer {text[:80]!r} is not 'latitude, longitude'")
    lat, lon = (_float(p, "coordinate") for p in parts)
    if lat is None or lon is None:
        raise ValueError(f"coordinate answer {text[:80]!r} is not 'latitude, longitude'")
    return lat, lon


def _hint_text(value: Any) -> str | None:
    """Hint sentences joined; a cell that is no valid list (one released row lacks a quote) stays text."""
    try:
        items = _list_cell(value, "hint") if isinstance(value, str) and value.strip()[:1] == "[" else value
    except ValueError:
        items = str(value).strip().strip("[]").replace('"', "")
    if isinstance(items, list):
        text = " ".join(str(h).strip() for h in items if str(h).strip())
    else:
        text = str(items).strip() if items not in (None, "") else ""
    return text or None


def where_street_row(
    row: dict[str, Any], index: int, images: ImageResolver, weights: dict[str, list[float]] | None = None
) -> Sample:
    """WhereStreet: answer text at a level (or coordinates), optional hint, key clues, Shapley weights.

    Released layout ``BVID,key_clues,answer,answer_type,hint``: JSON lists in the cells, the
    answer a fine→coarse hierarchy ("Liuzhou, Guangxi, China") at ``answer_type`` or
    "latitude, longitude" for ``latitude & longitude`` items; the source split is the id
    (``BV…`` bilibili, else YouTube) and weights come from ``gt_key_clues_weight.json``.
    """
    sample_id = str(_first(row, ("BVID", "bvid", *_ID_KEYS)) or _sample_id(row, index))
    kind = _first(row, ("answer_type", "level", "answer_level"))
    lat = _float(_first(row, _LAT_KEYS), "latitude")
    lon = _float(_first(row, _LON_KEYS), "longitude")
    clues = _list_cell(_first(row, ("key_clues", "clues")), "key_clues") or []
    raw_weights = _maybe_json(_first(row, ("clue_weights", "shapley", "shapley_values")))
    if raw_weights is None and weights is not None:
        raw_weights = weights.get(sample_id)
    if isinstance(raw_weights, str):
        raw_weights = [float(part) for part in raw_weights.split("|") if part.strip()]
    if isinstance(raw_weights, dict):
        raw_weights = [float(raw_weights.get(clue, 0.0)) for clue in clues]
    answer = _first(row, ("answer", "answer_text", "label"))
    level = "coordinates" if kind is None and lat is not None else answer_level(str(kind or ""))
    if level == "coordinates" and lat is None:
        if not answer:
            raise ValueError("a coordinate item needs coordinates")
        lat, lon = _coordinate_answer(str(answer))
    if level != "coordinates" and not answer:
        raise ValueError("a level answer needs answer text")
    hint = _hint_text(_first(row, ("hint",)))
    labels = _labels(row)
    given = _first(row, ("hint_level",))
    if level != "coordinates":
        answer_labels = hierarchy_labels(str(answer), level) if "," in str(answer) else {level: str(answer)}
        labels = {**labels, **answer_labels}
        given = given or hint_level(hint, labels)
    source = source_of(sample_id) if "BVID" in row or "bvid" in row else row.get("split")
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, _IMAGE_KEYS), sample_id),
        lat=lat,
        lon=lon,
        labels=labels,
        answer_type="coordinates" if level == "coordinates" else "level",
        answer_level=None if level == "coordinates" else level,
        answer=None if level == "coordinates" else str(answer),
        hint=hint,
        hint_level=given,
        key_clues=[str(c) for c in clues],
        clue_weights=[float(w) for w in raw_weights or []],
        split=source,
        data_source="wherestreet",
        metadata={"answer_type": str(kind)} if kind is not None else {},
    )


WEIGHTS_FILE = "gt_key_clues_weight.json"


def read_clue_weights(path: Path) -> dict[str, list[float]]:
    """The released Shapley weights file: ``{id: [w1, w2, …]}`` in key-clue order."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"{path}: cannot read clue weights: {exc}") from exc
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: expected an object of id -> weight list")
    out: dict[str, list[float]] = {}
    for key, values in data.items():
        if not isinstance(values, list) or not all(isinstance(v, int | float) for v in values):
            raise DatasetError(f"{path}: weights of {key!r} are not a list of numbers")
        out[str(key)] = [float(v) for v in values]
    return out


ADAPTERS: dict[str, RowAdapter] = {
    "generic": generic_row,
    "im2gps3k": im2gps_row,
    "yfcc4k": im2gps_row,
    "osv5m": osv5m_row,
    "mp16pro": mp16pro_row,
    "greval": greval_row,
    "geobench": geobench_row,
    "mapbench": map_bench_row,
    "wherecountry": where_country_row,
    "wherestreet": where_street_row,
}
FORMATS: tuple[str, ...] = (*ADAPTERS, "hf")


# ----------------------------------------------------------------------------- validation


def image_problem(sample: Sample) -> str | None:
    """Why a sample's image cannot be read, or None when the file is there."""
    if not sample.image:
        names = "/".join(s.lstrip(".") for s in IMAGE_SUFFIXES[:4])
        return f"image not found: no {sample.id}.{{{names}}} (any case) in the image folder"
    if not Path(sample.image).is_file():
        return f"image not found: {sample.image}"
    return None


def validate_sample(sample: Sample, check_images: bool = False) -> list[str]:
    """Problems with one sample's record: coordinates out of range, inconsistent answers.

    With ``check_images`` a missing image is one of them; loaders report missing images
    separately (``Dataset.missing_images``) and keep the sample, so a run records it as failed.
    """
    problems: list[str] = []
    if check_images and (missing := image_problem(sample)):
        problems.append(missing)
    if (sample.lat is None) != (sample.lon is None):
        problems.append("only one of latitude / longitude is given")
    if sample.lat is not None and not -90.0 <= sample.lat <= 90.0:
        problems.append(f"latitude {sample.lat} outside [-90, 90]")
    if sample.lon is not None and not -180.0 <= sample.lon <= 180.0:
        problems.append(f"longitude {sample.lon} outside [-180, 180]")
    if sample.answer_type == "coordinates" and sample.lat is None and not sample.labels:
        problems.append("no ground truth: neither coordinates nor place labels")
    if sample.answer_type == "choice":
        if not sample.choices or sample.answer is None:
            problems.append("multiple choice without choices or answer")
        elif sample.answer not in CHOICE_LETTERS[: len(sample.choices)]:
            problems.append(f"answer {sample.answer!r} is not one of the choice letters")
    if sample.clue_weights and len(sample.clue_weights) != len(sample.key_clues):
        problems.append(f"{len(sample.clue_weights)} clue weights for {len(sample.key_clues)} key clues")
    return problems


def build_samples(
    rows: Iterable[dict[str, Any]],
    adapter: RowAdapter,
    images: ImageResolver,
    check_images: bool = True,
    missing_images: list[DatasetProblem] | None = None,
) -> tuple[list[Sample], list[DatasetProblem]]:
    """Apply a row adapter, collecting bad rows and duplicate ids as problems.

    A sample whose image is missing stays in the samples (a run records it as failed);
    with ``check_images`` it is listed in ``missing_images``.
    """
    samples: list[Sample] = []
    problems: list[DatasetProblem] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        if "__error__" in row:
            problems.append(DatasetProblem(index, None, str(row["__error__"])))
            continue
        try:
            sample = adapter(row, index, images)
        except (ValueError, TypeError, ValidationError) as exc:
            message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
            problems.append(DatasetProblem(index, _sample_id(row, index), message))
            continue
        issues = validate_sample(sample)
        if check_images and missing_images is not None and (missing := image_problem(sample)):
            missing_images.append(DatasetProblem(index, sample.id, missing))
        if sample.id in seen:
            issues.append("duplicate id")
        seen.add(sample.id)
        if issues:
            problems.extend(DatasetProblem(index, sample.id, issue) for issue in issues)
            continue
        samples.append(sample)
    return samples, problems


# ----------------------------------------------------------------------------- entry points


def _table_in(folder: Path) -> Path:
    tables = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".csv", ".tsv", ".jsonl", ".json"))
    if len(tables) != 1:
        names = ", ".join(p.name for p in tables) or "none"
        raise DatasetError(f"{folder}: expected exactly one .csv/.tsv/.jsonl/.json table, found {names}")
    return tables[0]


def _image_root(table: Path, images: Path | None) -> Path:
    if images is not None:
        return images
    for name in ("images", "imgs", "img"):
        if (table.parent / name).is_dir():
            return table.parent / name
    return table.parent


def detect_format(path: Path) -> str:
    """Guess the adapter from a table's column names (or ``hf`` for a saved dataset)."""
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        return "hf"
    table = _table_in(path) if path.is_dir() else path
    if table.suffix.lower() == ".parquet":
        return "hf"
    first = next(iter(read_rows(table)), {})
    return format_of_columns(set(first), first)


def format_of_columns(columns: set[str], first: dict[str, Any]) -> str:
    """The adapter a row's column names call for (shared by table and Hugging Face loaders)."""
    if {"IMG_ID", "LAT", "LON"} <= columns and {"city", "state", "country"} <= columns:
        return "mp16pro"
    if {"IMG_ID", "LAT", "LON"} <= columns:
        return "im2gps3k"
    if {"id", "latitude", "longitude"} <= columns and (
        "sub-region" in columns or any(c.startswith("unique_") for c in columns)
    ):
        return "osv5m"
    if {"gt_lat", "gt_lon"} <= columns:
        return "greval"
    if {"id", "labels", "answer_type"} <= columns:  # geosleuth's own Sample records (any benchmark)
        return "generic"
    if "distractors" in columns or {"nation", "options"} <= columns:
        return "wherecountry"
    if "key_clues" in columns and ({"level", "hint", "answer_type", "BVID"} & columns):
        return "wherestreet"
    if "metadata" in columns and "location" in str(first.get("metadata"))[:MAX_LITERAL_CHARS]:
        return "geobench"
    return "generic"


def load_dataset(
    path: str | Path,
    format: str = "auto",
    images: str | Path | None = None,
    *,
    seed: int = 0,
    split: str | None = None,
    check_images: bool = True,
) -> Dataset:
    """Load a benchmark from a table file, a folder (table + images), a release's own files
    (``info.json``, ``info.txt``, the hub's ``test.csv``, …) or a Hugging Face dataset."""
    source = Path(path).expanduser()
    if not source.exists():
        raise DatasetError(f"dataset not found: {source}")
    if format not in ("auto", *FORMATS):
        raise DatasetError(f"unknown dataset format {format!r}; choose one of auto, {', '.join(FORMATS)}")
    layout = find_layout(source, split)
    if layout is not None and format not in ("auto", layout.format):
        layout = None  # an explicit format reads the files its own way
    if layout is not None and layout.parts:
        return _load_parts(source, layout, seed=seed, split=split, check_images=check_images)
    fmt = layout.format if layout is not None else detect_format(source) if format == "auto" else format
    image_root = Path(images).expanduser() if images else (layout.images if layout is not None else None)
    if fmt == "hf":
        hf_source, snapshot = (layout.table, layout.images) if layout is not None else (source, None)
        loaded = _load_hf(
            hf_source,
            Path(images).expanduser() if images else None,
            split=split,
            seed=seed,
            check_images=check_images,
            snapshot=snapshot,
            shards=layout.shards if layout is not None else (),
        )
        if layout is not None:
            loaded.name, loaded.source, loaded.layout = source.stem, str(source.resolve()), layout.name
        return loaded
    table = layout.table if layout is not None else _table_in(source) if source.is_dir() else source
    weights_file = table.parent / WEIGHTS_FILE
    weights = read_clue_weights(weights_file) if fmt == "wherestreet" and weights_file.is_file() else None
    resolver = ImageResolver(_image_root(table, image_root), table.parent, zip_parts=fmt == "osv5m")
    rows = layout.rows if layout is not None and layout.rows is not None else lambda: read_rows(table)
    missing: list[DatasetProblem] = []
    try:
        samples, problems = build_samples(
            rows(), _adapter(fmt, seed, weights), resolver, check_images, missing
        )
        if not samples:
            _no_samples(table, fmt, layout, rows, problems)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise DatasetError(f"{table}: cannot read: {exc}") from exc
    except LayoutError as exc:
        raise DatasetError(str(exc)) from exc
    if split is not None:
        samples = [s for s in samples if s.split in (None, split)]
        kept = {s.id for s in samples}
        missing = [m for m in missing if m.sample_id in kept]
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format=fmt,
        samples=samples,
        problems=problems,
        missing_images=missing,
        layout=layout.name
        if layout is not None
        else f"GREval-Bench ({table.name})"
        if fmt == "greval"
        else None,
    )


def find_layout(source: Path, split: str | None = None) -> Layout | None:
    """The distributed layout a file or folder is, by the names and columns its authors ship."""
    try:
        if source.is_dir():
            hub = hub_layout(
                source, split
            )  # before the save_to_disk check: the hub ships dataset_info.json too
            if hub is not None:
                return hub
            if (source / "dataset_info.json").exists() or (source / "dataset_dict.json").exists():
                return None
            found = folder_layout(source)
            if found is None and any(source.glob("*.parquet")):
                found = Layout("parquet files", "hf", source)
            return found
        if source.name in ("info.json", "info.txt"):  # the OSV-5M baseline files, named directly
            return folder_layout(source.parent)
        return table_layout(source)  # a JSON release (GREval-Bench) is known by its keys once read
    except LayoutError as exc:
        raise DatasetError(str(exc)) from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error, DatasetError):
        return None  # not a release layout; the ordinary reader reports what is wrong with it


_REQUIRED: dict[str, tuple[tuple[str, ...], ...]] = {
    "im2gps3k": (
        ("IMG_ID", "img_id", "id", "image"),
        ("LAT", "lat", "latitude"),
        ("LON", "lon", "longitude"),
    ),
    "yfcc4k": (("IMG_ID", "img_id", "id", "image"), ("LAT", "lat", "latitude"), ("LON", "lon", "longitude")),
    "osv5m": (("id",), ("latitude",), ("longitude",)),
    "mp16pro": (("IMG_ID",), ("LAT",), ("LON",)),
    "greval": (("gt_lat",), ("gt_lon",)),
    "mapbench": (_LAT_KEYS, _LON_KEYS),
}
"""Columns a format cannot do without (one name of each group); other formats name what is missing per row."""


def _lacks_columns(fmt: str, row: dict[str, Any]) -> bool:
    """True when a row carries none of the names a format reads its ground truth from."""
    if fmt == "generic":
        names = set(_LAT_KEYS) | {k for aliases in _LEVEL_ALIASES.values() for k in aliases} | {"labels"}
        return not names & set(row)
    return any(not set(group) & set(row) for group in _REQUIRED.get(fmt, ()))


def _no_samples(
    table: Path,
    fmt: str,
    layout: Layout | None,
    rows: Callable[[], Iterable[dict[str, Any]]],
    problems: list[DatasetProblem],
) -> None:
    """Raise when a layout yields no sample because it is not what it was read as.

    Rows that are there but bad (a coordinate that is no number) stay listed problems; a file
    whose rows carry none of the expected columns, or nothing at all, is an error naming the
    columns found and what each format expects.
    """
    first = next((r for r in rows() if "__error__" not in r), None)
    if problems and first is not None and not _lacks_columns(fmt, first):
        return
    name = layout.name if layout is not None else fmt
    found = ", ".join(list(first)[:40]) if first is not None else "no usable row"
    shown = "; ".join(str(p) for p in problems[:3])
    raise DatasetError(
        f"{table}: read as {name}, it yields 0 samples. Columns / keys found: {found}."
        + (f" First problems: {shown}." if shown else "")
        + f" Each format expects — {expected_text()}"
    )


def _load_parts(source: Path, layout: Layout, *, seed: int, split: str | None, check_images: bool) -> Dataset:
    """A release of several tables (EarthWhere's WhereCountry and WhereStreet) as one dataset."""
    samples: list[Sample] = []
    problems: list[DatasetProblem] = []
    missing: list[DatasetProblem] = []
    for part in layout.parts:
        loaded = load_dataset(part.table, part.format, seed=seed, split=split, check_images=check_images)
        samples.extend(loaded.samples)
        problems.extend(
            DatasetProblem(p.row, p.sample_id, f"{part.table.name}: {p.problem}") for p in loaded.problems
        )
        missing.extend(loaded.missing_images)
    seen: set[str] = set()
    for index, sample in enumerate(samples):
        if sample.id in seen:
            problems.append(DatasetProblem(index, sample.id, "duplicate id across the release's tables"))
        seen.add(sample.id)
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format=layout.format,
        samples=samples,
        problems=problems,
        missing_images=missing,
        layout=layout.name,
    )


def _adapter(fmt: str, seed: int, weights: dict[str, list[float]] | None = None) -> RowAdapter:
    """The row adapter of a format, bound to the shuffling seed and clue weights it needs."""
    if fmt == "wherecountry":
        return lambda row, index, res: where_country_row(row, index, res, seed=seed)
    if fmt == "wherestreet":
        return lambda row, index, res: where_street_row(row, index, res, weights=weights)
    return ADAPTERS[fmt]


def _load_hf(
    source: Path,
    image_root: Path | None,
    *,
    split: str | None,
    seed: int,
    check_images: bool,
    snapshot: Path | None = None,
    shards: tuple[Path, ...] = (),
) -> Dataset:
    """Samples from a saved Hugging Face dataset or parquet file(s); in a hub ``snapshot`` folder,
    image paths in the rows are relative to it and embedded images go beside it. Each of its
    ``shards`` writes its embedded images to a folder of its own (rows without an id are named by
    their index within the shard, which repeats across shards and splits)."""
    from geosleuth.eval.hf import HFReadError, read_hf_rows

    named = snapshot or source
    folder = image_root or named.with_name(named.name + ".images")
    try:
        if shards:
            rows = [row for shard in shards for row in read_hf_rows(shard, folder / shard.stem, split)]
        else:
            rows = read_hf_rows(source, folder, split)
    except HFReadError as exc:
        raise DatasetError(str(exc)) from exc
    adapter = _adapter(format_of_columns(set(rows[0]), rows[0]), seed)
    root = image_root or (source.parent if source.is_file() else source)
    missing: list[DatasetProblem] = []
    samples, problems = build_samples(rows, adapter, ImageResolver(root, snapshot), check_images, missing)
    return Dataset(
        name=source.stem,
        source=str(source.resolve()),
        format="hf",
        samples=samples,
        problems=problems,
        missing_images=missing,
    )
