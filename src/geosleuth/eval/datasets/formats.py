"""Row formats: one adapter per benchmark turns a raw row into a ``Sample`` (coordinates, labels,
choices, clues), raising ValueError with the reason for a bad row."""

from __future__ import annotations

import ast
import json
import math
import random
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from geosleuth.core.ids import ID_KEYS, image_sample_id, written_id
from geosleuth.core.records import Sample
from geosleuth.eval.datasets.catalog import DATASET_FORMATS
from geosleuth.eval.datasets.image_refs import ImageResolver
from geosleuth.eval.datasets.table_rows import DatasetError
from geosleuth.eval.wherebench.rules import answer_level, hierarchy_labels, hint_level, source_of

CHOICE_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
IMAGE_KEYS = ("image", "image_path", "img_path", "img", "file", "filename", "file_name", "path")
LAT_KEYS = ("lat", "latitude", "LAT", "Latitude", "gps_lat")
LON_KEYS = ("lon", "lng", "longitude", "LON", "Longitude", "gps_lon", "long")
LEVEL_ALIASES: dict[str, tuple[str, ...]] = {
    "country": ("country", "nation", "country_name"),
    "admin1": ("admin1", "province_or_state", "province", "state", "region"),
    "city": ("city",),
    "admin2": ("admin2", "sub-region", "sub_region", "county", "district", "area"),
    "town": ("town", "subdistrict"),
    "street": ("street",),
    "poi": ("poi",),
}


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
    except (TypeError, ValueError, OverflowError):  # OverflowError: an int past float's range
        raise ValueError(f"{name} {_shown(value)} is not a number") from None
    if math.isnan(number):
        return None
    if math.isinf(number):  # "1e999", or a string of 400 digits: float reads them as infinity
        raise ValueError(f"{name} {_shown(value)} is not a finite number")
    return number


def _shown(value: Any) -> str:
    """A cell as a message quotes it: its first 40 characters, and its length when longer."""
    text = str(value)
    return repr(text) if len(text) <= 40 else f"{text[:40]!r}… ({len(text):,} characters)"


def _maybe_json(value: Any) -> Any:
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, too deep, or an integer past 4,300 digits
            return value
    return value


RowAdapter = Callable[[dict[str, Any], int, ImageResolver], Sample]


def _labels(row: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = {}
    nested = row.get("labels")
    if isinstance(nested, dict):
        labels.update({k: str(v) for k, v in nested.items() if v not in (None, "")})
    for level, aliases in LEVEL_ALIASES.items():
        value = _first(row, aliases)
        if value is not None and level not in labels and not isinstance(value, dict | list):
            labels[level] = str(value)
    return labels


def row_sample_id(row: dict[str, Any], index: int) -> str:
    """The row's id (`geosleuth.core.ids.written_id`), else its image's, else its position."""
    value = written_id(row)
    if value is None:
        image = _first(row, IMAGE_KEYS)
        return image_sample_id(image) if isinstance(image, str) else str(index)
    return value


def generic_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """Any row with an id, an image reference and coordinates / labels under common names."""
    sample_id = row_sample_id(row, index)
    image = _first(row, IMAGE_KEYS)
    known = set(Sample.model_fields)
    extra = {k: v for k, v in row.items() if k not in known and k not in LAT_KEYS + LON_KEYS}
    data = {k: _maybe_json(v) for k, v in row.items() if k in known and v not in (None, "")}
    data.update(
        id=sample_id,
        image=images.resolve(str(image) if image is not None else None, sample_id),
        lat=_float(_first(row, LAT_KEYS), "latitude"),
        lon=_float(_first(row, LON_KEYS), "longitude"),
        labels=_labels(row),
    )
    metadata = dict(data.get("metadata") or {})
    metadata.update({k: v for k, v in extra.items() if k not in ID_KEYS + IMAGE_KEYS})
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
        id=image_sample_id(image_id),
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
    """GeoBench-style: metadata JSON with a location and ``{country, province_or_state, city}``
    (GeoVista's GeoBench), or ccmdi's GeoBench map rows ``{image_path, country, lat, lng, map_bounds}``."""
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
    sample_id = str(uid) if uid not in (None, "") else row_sample_id(row, index)
    data_type = _first(merged, ("data_type", "type", "image_type"))
    metadata: dict[str, Any] = {"data_type": data_type} if data_type else {}
    if row.get("map_bounds") is not None:  # ccmdi's GeoGuessr maps: the map a guess is scored on
        metadata["map_bounds"] = row["map_bounds"]
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, (*IMAGE_KEYS, "raw_image_path")), sample_id),
        lat=_float(_first(merged, LAT_KEYS), "latitude"),
        lon=_float(_first(merged, LON_KEYS), "longitude"),
        labels=_labels(merged),
        data_source=str(row.get("data_source") or "geobench"),
        metadata=metadata,
    )


def map_bench_row(row: dict[str, Any], index: int, images: ImageResolver) -> Sample:
    """Map-benchmark rows ``{image, latitude, longitude, city, country}``."""
    sample_id = row_sample_id(row, index)
    return Sample(
        id=sample_id,
        image=images.resolve(_first(row, IMAGE_KEYS), sample_id),
        lat=_float(_first(row, LAT_KEYS), "latitude"),
        lon=_float(_first(row, LON_KEYS), "longitude"),
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
    sample_id = image_sample_id(flat)
    image = images.resolve(image_id, sample_id)
    if not Path(image or "").is_file():
        image = images.resolve(flat, sample_id) or image
    skip = {"IMG_ID", "LAT", "LON", "country", "state", "county", "city"}
    return Sample(
        id=sample_id,
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
    except (ValueError, RecursionError):
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
    sample_id = str(_first(row, ("panoID", "pano_id", *ID_KEYS)) or row_sample_id(row, index))
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
        image=images.resolve(_first(row, IMAGE_KEYS), sample_id),
        lat=_float(_first(row, LAT_KEYS), "latitude"),
        lon=_float(_first(row, LON_KEYS), "longitude"),
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
    sample_id = str(_first(row, ("BVID", "bvid", *ID_KEYS)) or row_sample_id(row, index))
    kind = _first(row, ("answer_type", "level", "answer_level"))
    lat = _float(_first(row, LAT_KEYS), "latitude")
    lon = _float(_first(row, LON_KEYS), "longitude")
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
        image=images.resolve(_first(row, IMAGE_KEYS), sample_id),
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


_BUILTIN: dict[str, RowAdapter] = {
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


@DATASET_FORMATS.validator
def _as_adapter(name: str, value: Any) -> RowAdapter:
    if not callable(value):
        raise TypeError("a dataset format is a row adapter: (row, index, resolver) -> Sample")
    return value  # type: ignore[no-any-return]


for _name, _row_adapter in _BUILTIN.items():
    DATASET_FORMATS.register(_name, _row_adapter)
