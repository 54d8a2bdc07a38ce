"""Thinking with Map: the first JSON object with lat, lon, city and country."""

from __future__ import annotations

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.json_answer import _json_objects


def _strict_twm(text: str) -> _Found | None:
    """Thinking-with-Map: first object parsing as JSON with lat, lon, city and country."""
    for obj in _json_objects(text):
        if isinstance(obj, dict) and all(k in obj for k in ("lat", "lon", "city", "country")):
            try:
                lat, lon = float(obj["lat"]), float(obj["lon"])
            except (TypeError, ValueError, OverflowError):
                return _Found(fmt="json")
            fields = {k: str(obj[k]) for k in ("city", "country") if obj[k] is not None}
            return _Found(lat=lat, lon=lon, fields=fields, fmt="json")
    return None
