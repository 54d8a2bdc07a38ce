"""GeoAgent answers: ``Country; Region; Place`` (coarse to fine), bare or as a JSON value."""

from __future__ import annotations

import re
from typing import Any

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.coordinates import _DIGITS_ONLY, parse_coordinate_text
from geosleuth.core.parsing.prose import _ANSWER_PREFIX, clean_name

_SEMI_LEVELS = ("country", "admin1", "city", "admin2", "town")


def _from_semicolons(region: str) -> _Found | None:
    """``Country; Region; Place`` on one line: coarse to fine, the last part the most precise."""
    body = region.strip().strip("*`").strip()
    if "\n" in body or "{" in body or len(body) > 300:
        return None
    body = _ANSWER_PREFIX.sub("", body.replace("**", "") if "**" in body else body).strip()  # "Final answer:"
    parts = [p.strip().strip(".").strip() for p in re.split(r"[;；]", body)]
    if len(parts) < 2 or len(parts) > 8:
        return None
    lat = lon = None
    if len(parts) >= 4:  # "Country; Region; Place; 48.85; 2.35": coordinates close the line
        lat, lon = parse_coordinate_text(parts[-2], "lat"), parse_coordinate_text(parts[-1], "lon")
        if lat is not None and lon is not None:
            parts = parts[:-2]
        else:
            lat = lon = None
    named = [(i, p) for i, p in enumerate(parts) if p]
    if len(named) < 2 or any(clean_name(p) != p or _DIGITS_ONLY.fullmatch(p) for _, p in named):
        return None
    fields: dict[str, str] = {"country": parts[0]} if parts[0] else {}
    last_i, last = named[-1]
    if len(parts) == 2:
        fields["admin1"] = last
    else:
        for level, part in zip(_SEMI_LEVELS[1:], parts[1:last_i], strict=False):
            if part:
                fields[level] = part
        fields["poi"] = last
        fields["place"] = last
    fields["address"] = ", ".join(p for _, p in reversed(named))
    return _Found(lat=lat, lon=lon, fields=fields, fmt="semicolon")


def _semicolon_value(obj: dict[str, Any]) -> _Found | None:
    """GeoAgent JSON: ``{"reasoning": …, "answer": "Country; Region; Place"}``."""
    for key in ("answer", "final_answer", "location", "prediction"):
        value = obj.get(key)
        if isinstance(value, str):
            found = _from_semicolons(value)
            if found is not None:
                return found
    return None
