"""Key/value mappings (decoded JSON, answer lines) -> answer fields; each key set planned once."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.coordinates import _coordinate, _free_coordinates
from geosleuth.core.parsing.delimiters import squeeze
from geosleuth.core.parsing.prose import clean_name

LAT_KEYS = ("lat", "latitude", "纬度")
LON_KEYS = ("lon", "lng", "long", "longitude", "经度")
_FIELD_KEYS: dict[str, tuple[str, ...]] = {
    "country": ("country", "nation", "country_name", "country/region", "国家", "国家/地区"),
    "admin1": (
        "admin1", "admin_1", "region", "state", "province", "prefecture", "province/state",
        "state/province", "province_or_state", "state_or_province", "province_state", "state_province",
        "province/region", "region/province", "state/region", "region/state", "oblast", "省", "省份", "州",
    ),
    "city": ("city", "town_or_city", "city_or_town", "city/town", "town/city", "municipality", "城市", "市"),
    "admin2": ("admin2", "admin_2", "county", "district"),
    "town": ("town", "village", "subdistrict", "neighborhood", "neighbourhood"),
    "street": ("street", "road"),
    "poi": ("poi", "place", "landmark", "specific_location", "location_name", "precise_place"),
    "address": ("address", "full_address", "location"),
}  # fmt: skip
_FIELD_OF = {key: (name, rank) for name, keys in _FIELD_KEYS.items() for rank, key in enumerate(keys)}
_FIELD_ORDER = {name: i for i, name in enumerate(_FIELD_KEYS)}
_CONF_KEYS = ("confidence", "probability", "certainty")
_PAIR_KEYS = ("coordinates", "coords", "gps", "latlon", "lat_lon", "lat/lon")


def field_key(k: str) -> str:
    """The canonical spelling of an answer key: ``"Town or City"`` -> ``town_or_city``."""
    return _field_key(str(k)) if len(str(k)) <= 100 else _KEY_SEPARATORS.sub("_", str(k).strip("* ").lower())


@lru_cache(maxsize=8192)
def _field_key(k: str) -> str:
    return _KEY_SEPARATORS.sub("_", k.strip().strip("*").strip().lower())


_KEY_SEPARATORS = re.compile(r"[\s\-]+")


@dataclass(frozen=True, slots=True)
class _KeyPlan:
    """Which of a mapping's own keys hold what: answers repeat one schema, so this is per key set."""

    lat: str | None
    lon: str | None
    pair: str | None
    fields: tuple[tuple[str, tuple[str, ...]], ...]  # (field, its keys best first), in field order
    confidence: str | None


# mappings with more keys, or longer ones, are planned each time rather than cached: the cache
# must never hold a hostile answer's megabyte keys
_PLANNED_KEYS = 32
_PLANNED_KEY_CHARS = 512


def _key_plan(keys: tuple[str, ...]) -> _KeyPlan:
    if len(keys) <= _PLANNED_KEYS and sum(map(len, keys)) <= _PLANNED_KEY_CHARS:
        return _cached_plan(keys)
    return _plan(keys)


def _plan(keys: tuple[str, ...]) -> _KeyPlan:
    own = {field_key(k): k for k in keys}  # canonical -> the mapping's key (the last one wins)
    ranked: dict[str, list[tuple[int, str]]] = {}
    for canonical, key in own.items():
        hit = _FIELD_OF.get(canonical)
        if hit is not None:
            ranked.setdefault(hit[0], []).append((hit[1], key))
    fields = tuple(
        (name, tuple(key for _, key in sorted(ranked[name])))
        for name in sorted(ranked, key=_FIELD_ORDER.__getitem__)
    )
    return _KeyPlan(
        lat=next((own[k] for k in LAT_KEYS if k in own), None),
        lon=next((own[k] for k in LON_KEYS if k in own), None),
        pair=next((own[k] for k in _PAIR_KEYS if k in own), None),
        fields=fields,
        confidence=next((own[k] for k in _CONF_KEYS if k in own), None),
    )


_cached_plan = lru_cache(maxsize=4096)(_plan)


def _from_mapping(obj: dict[str, Any], strict: bool) -> _Found:
    """Fields from a key/value mapping (parsed JSON or answer lines)."""
    plan = _key_plan(tuple(obj))
    found = _Found()
    lat_raw = obj[plan.lat] if plan.lat is not None else None
    lon_raw = obj[plan.lon] if plan.lon is not None else None
    labeled = lat_raw is not None and lon_raw is not None
    if lat_raw is None and lon_raw is None and plan.pair is not None:
        pair = obj[plan.pair]
        if isinstance(pair, (list, tuple)) and len(pair) == 2:
            lat_raw, lon_raw = pair
        elif isinstance(pair, str) and not strict:
            free = _free_coordinates(squeeze(pair)[:500], in_block=True)
            if free is not None:
                lat_raw, lon_raw, labeled = free.lat, free.lon, free.labeled
    if lat_raw is not None and lon_raw is not None:
        lat = _coordinate(lat_raw, "lat", strict, found.recovered)
        lon = _coordinate(lon_raw, "lon", strict, found.recovered)
        if lat is not None and lon is not None:
            found.lat, found.lon = lat, lon
            found.labeled = labeled
    for name, keys in plan.fields:  # per field, its best-ranked key that holds a value
        val = None
        for key in keys:
            val = obj[key]
            if val is not None and val != "":
                break
        else:
            continue
        if not isinstance(val, (dict, list, bool)):
            text = clean_name(str(val), found.recovered, limit=200 if name == "address" else 100)
            if text is not None:
                found.fields[name] = text
    if plan.confidence is not None and obj[plan.confidence] is not None:
        found.confidence = _confidence(obj[plan.confidence])
    return found


def _confidence(value: Any) -> float | None:
    try:
        text = str(value).strip()[:50].rstrip("%")
        c = float(text)
    except (ValueError, OverflowError):
        return None
    if not math.isfinite(c):
        return None
    return c / 100.0 if c > 1.0 or str(value).strip().endswith("%") else c
