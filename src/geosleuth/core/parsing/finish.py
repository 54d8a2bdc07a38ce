"""A candidate answer -> :class:`Prediction`: coordinate checks, address split, level, geocoding."""

from __future__ import annotations

import math
from typing import Any

from geosleuth.core.geo import valid_coordinates
from geosleuth.core.parsing.base import Geocoder, ParseMode, PlaceLevelFn, _Found
from geosleuth.core.parsing.prose import _country_code, _split_address
from geosleuth.core.records import LEVELS, ParseStatus, Prediction


def _finish(
    raw: str,
    found: _Found | None,
    choice: str | None,
    geocoder: Geocoder | None,
    mode: ParseMode,
    place_level: PlaceLevelFn | None,
    country_codes: bool = True,
) -> Prediction:
    if found is None or not found.useful:
        status = ParseStatus.OK if choice else ParseStatus.FAILED
        return Prediction(raw=raw, status=status, choice=choice, format="choice" if choice else None)
    recovered, fields = found.recovered, found.fields  # ``found`` is this answer's own: changed in place
    lat, lon = found.lat, found.lon
    if lat is not None and lon is not None and not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 180.0):
        lat, lon = _fix_coordinates(lat, lon, mode, recovered, swap=not found.labeled)
    if len(fields) == 1 and "address" in fields:
        fields.update(_split_address(fields["address"], recovered))
    resolve_place = (
        place_level is not None and "place" in fields and "city" not in fields and "admin1" not in fields
    )
    needs_code = country_codes or resolve_place or (lat is None and geocoder is not None)
    country_code = _country_code(fields.get("country")) if needs_code else None
    if resolve_place and place_level is not None:
        level = _resolve_level(place_level, fields["place"], country_code)
        if level is not None:
            fields[level] = fields.pop("place")
            recovered.append("place_level_resolved")
    coords_source: str | None = "model" if lat is not None else None
    if lat is None and geocoder is not None:
        query = _geocode_query(fields)
        if query:
            hit = _geocode(geocoder, query, country_code)
            if hit is not None:
                lat, lon = hit
                coords_source = "geocoded"
                recovered.append("geocoded_address")
    if lat is not None and lon is not None:
        status = ParseStatus.OK
    else:
        status = ParseStatus.PARTIAL if (fields or choice) else ParseStatus.FAILED
    # only the values present: validating a default costs as much as validating a value
    given: dict[str, Any] = {k: v for k, v in fields.items() if k in _NAME_FIELDS}
    if lat is not None and lon is not None:
        given["lat"], given["lon"], given["coords_source"] = lat, lon, coords_source
    if country_code is not None:
        given["country_code"] = country_code
    if choice is not None:
        given["choice"] = choice
    if found.confidence is not None:
        given["confidence"] = found.confidence
    if found.fmt is not None:
        given["format"] = found.fmt
    if recovered:
        given["recovered"] = list(dict.fromkeys(recovered))
    return Prediction(raw=raw, status=status, **given)


_NAME_FIELDS = frozenset(("country", "admin1", "city", "admin2", "town", "street", "poi", "place", "address"))


def _resolve_level(place_level: PlaceLevelFn, name: str, country: str | None) -> str | None:
    try:
        level = place_level(name, country)
    except Exception:  # noqa: BLE001 - a failing resolver leaves the place neutral
        return None
    return level if level in LEVELS and level != "country" else None


def _fix_coordinates(
    lat: float, lon: float, mode: ParseMode, recovered: list[str], swap: bool = True
) -> tuple[float | None, float | None]:
    """Swap an impossible unlabeled pair that is valid swapped (robust); reject anything out of range.

    A value the answer itself calls the latitude is never moved: ``{"lat": 90.0000001, "lon":
    2.35}`` is an out-of-range latitude, not a swapped pair."""
    if swap and mode == "robust" and 90 < abs(lat) <= 180 and abs(lon) <= 90:
        lat, lon = lon, lat
        recovered.append("swapped_lat_lon")
    if not (math.isfinite(lat) and math.isfinite(lon)) or abs(lat) > 90 or abs(lon) > 180:
        recovered.append("invalid_coordinates")
        return None, None
    return lat, lon


def _geocode_query(fields: dict[str, str]) -> str | None:
    if "address" in fields:
        return fields["address"]
    parts = [
        fields[k]
        for k in ("poi", "street", "town", "admin2", "city", "place", "admin1", "country")
        if k in fields and (k != "place" or fields[k] != fields.get("poi"))
    ]
    return ", ".join(parts) if parts else None


def _geocode(geocoder: Geocoder, query: str, country: str | None) -> tuple[float, float] | None:
    """Call either a ``search``-style gazetteer or a plain function; failures mean no match."""
    try:
        if hasattr(geocoder, "search"):
            places = geocoder.search(query, country=country, limit=1)  # type: ignore[union-attr]
            if not places and country is not None:
                places = geocoder.search(query, country=None, limit=1)  # type: ignore[union-attr]
            if not places:
                return None
            lat, lon = float(places[0].lat), float(places[0].lon)
        else:
            hit = geocoder(query, country)  # type: ignore[operator]
            if hit is None:
                return None
            lat, lon = float(hit[0]), float(hit[1])
    except Exception:  # noqa: BLE001 - a failing geocoder means "not geocoded", never a crash
        return None
    if not valid_coordinates(lat, lon):
        return None  # a geocoder's impossible point is no match, not a prediction
    return lat, lon
