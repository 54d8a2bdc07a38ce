"""Street-level refinement of the offline answer by a configured geocoding provider.

The offline gazetteer knows cities, not streets. When the sign reads a street address next to
the place it names ("Hertensteinstrasse 12" above "6004 Luzern") and the user configured a
geocoder (Nominatim, Photon, OpenCage, Google), that address is geocoded; a result within the
city's own circle moves the answer onto the street and the circle shrinks to a building's
block, with the provider named in the evidence. A result outside that circle contradicts the
place the sign names: it is not used, and the disagreement is told.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Prediction
from geosleuth.core.text import normalize
from geosleuth.gazetteer.libpostal import AddressParts

STREET_RADIUS_KM = 0.3
"""The circle of a street address's geocode: the building and its block, not a point."""
MIN_AGREE_KM = 25.0
"""A street geocode this close to the named place always agrees with it (small towns' circles)."""


@dataclass
class StreetFix:
    """What the street-level step did: its query and provider, the tool's output, and the
    refined answer (None when the geocode was missing or disagreed)."""

    query: str
    provider: str | None
    text: str
    ok: bool
    error: str | None
    latency_s: float
    parser: str = ""
    prediction: Prediction | None = None
    conflict: str | None = None


def street_query(text: str, place: str) -> str | None:
    """The address as the sign prints it: the line that names ``place`` (postcode and town) with
    the line above it when that one carries a house number; None when the sign has no such pair."""
    key = normalize(place)
    if not key:
        return None
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        if i > 0 and key in normalize(line) and any(c.isdigit() for c in lines[i - 1]):
            return f"{lines[i - 1]}, {line}"
    return None


def parsed_query(parts: AddressParts, text: str, place: str) -> str | None:
    """The street address libpostal read on the sign, spelled as the sign spells it, street then
    locality ("Hertensteinstrasse 12, 6004 Luzern"); None when it read no road, or a town other
    than ``place``."""
    key = normalize(place)
    if not parts.road or not parts.city or not key or key not in normalize(parts.city):
        return None
    street, end = _as_written([parts.road, parts.house_number], text)
    locality, _ = _as_written([parts.postcode, parts.city], text[end:])
    return f"{street}, {locality}"


def _as_written(values: list[str | None], text: str) -> tuple[str, int]:
    """The values in the sign's order and spelling (libpostal lower-cases what it labels), and
    where the last of them ends in ``text`` (the locality is read after the street: "Pizzeria
    Roma" above "00186 Roma")."""
    found: list[tuple[int, int, str]] = []
    for value in values:
        if not value:
            continue
        pattern = r"\s+".join(re.escape(word) for word in value.split())
        match = re.search(pattern, text, re.IGNORECASE)
        found.append((match.start(), match.end(), match.group()) if match else (len(text), 0, value))
    found.sort()
    return " ".join(written for _, _, written in found), max((end for _, end, _ in found), default=0)


async def street_level(pred: Prediction, text: str, tool_settings: Any) -> StreetFix | None:
    """Geocode the sign's street address with the configured provider; None when no provider is
    configured (offline), the answer names no city, or the sign prints no street address."""
    from geosleuth.core.countries import country_name
    from geosleuth.gazetteer.libpostal import parse_address, parser_name
    from geosleuth.tools.registry import build_registry, coerce_settings

    settings = coerce_settings(tool_settings)
    if settings.providers.geocode == "offline" or not pred.city or pred.lat is None or pred.lon is None:
        return None
    parts = parse_address(text)
    query = street_query(text, pred.city) if parts is None else parsed_query(parts, text, pred.city)
    if query is None:
        return None
    if pred.country_code:
        query = f"{query}, {country_name(pred.country_code)}"
    start = time.perf_counter()
    result = await build_registry(settings, names=["geocode"]).call("geocode", {"address": query})
    latency = time.perf_counter() - start
    fix = StreetFix(query, result.provider, result.text, result.ok, result.error, latency, parser_name())
    places = [p for p in result.data or [] if isinstance(p, dict) and "lat" in p and "lon" in p]
    if not result.ok or not places:
        return fix
    place = places[0]
    km = float(haversine_km(pred.lat, pred.lon, place["lat"], place["lon"]))
    source = result.provider or settings.providers.geocode
    if km > max(pred.radius_km or 0.0, MIN_AGREE_KM):
        fix.conflict = (
            f"{source} geocoded {query!r} {km:.0f} km from {pred.city}, which the sign names: "
            "the street geocode is not used"
        )
        return fix
    street = query.split(",")[0]
    fix.prediction = pred.model_copy(
        update={
            "lat": float(place["lat"]),
            "lon": float(place["lon"]),
            "radius_km": STREET_RADIUS_KM,
            "street": street,
            "address": query,
            "evidence": [
                *pred.evidence,
                f"street-level geocode of {query!r} by {source}: {place['lat']:.5f}, {place['lon']:.5f} "
                f"({km:.1f} km from the centre of {pred.city}; address read by {fix.parser})",
            ],
        }
    )
    return fix
