"""The column names peers' result files use, and the explicit ``--columns`` mapping for the rest.

Published per-image results spell the same idea many ways (GeoEstimation's ``predicted_lat`` /
``gt_long``, G3's ``LAT_pred``, IM2GPS's ``IMG_ID, LAT, LON``). The reader tries these names
(case-insensitively); a file that uses other names says which of its columns is which with
``--columns pred_lat=y_lat,pred_lon=y_lon``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

LAT_NAMES: tuple[str, ...] = ("lat", "latitude")
LON_NAMES: tuple[str, ...] = ("lon", "lng", "long", "longitude")
PRED_PREFIXES: tuple[str, ...] = ("pred_", "predicted_")
TRUTH_PREFIXES: tuple[str, ...] = ("true_", "gt_")


def prefixed_pairs(prefixes: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    """Every (latitude, longitude) name pair under each prefix, lower case, in preference order."""
    return tuple((p + lat, p + lon) for p in prefixes for lat in LAT_NAMES for lon in LON_NAMES)


def merged_pairs(*groups: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """Pairs in lower case, first occurrence kept (earlier groups take precedence)."""
    return tuple(dict.fromkeys((a.lower(), b.lower()) for group in groups for a, b in group))


PLACES365_2018_HEADER: tuple[str, ...] = (
    "IMG_ID",
    "AUTHOR",
    "LON",
    "LAT",
    "S3_Label",
    "S16_Label",
    "S365_Label",
    "Prob_indoor",
    "Prob_natural",
    "Prob_urban",
)
"""GeoEstimation's 2018 ``im2gps*_places365.csv`` header: the values are latitude, longitude, but
the names say LON, LAT (fixed on 2020-02-17, "latitude and longitude were confused")."""

MAPPED_TARGETS: dict[str, str] = {
    "id": "id",
    "pred_lat": "pred_lat",
    "pred_lon": "pred_lon",
    "true_lat": "true_lat",
    "true_lon": "true_lon",
    "text": "solution_str",
    "country": "country",
    "admin1": "admin1",
    "admin2": "admin2",
    "city": "city",
}
"""``--columns`` names -> the key the reader then finds the value under."""


def parse_columns(spec: str | list[str] | None) -> dict[str, str]:
    """``"pred_lat=y_lat,pred_lon=y_lon"`` (or several such options) -> {file column: reader key}.

    Raises ValueError naming the bad part and the names that may be mapped.
    """
    parts = [spec] if isinstance(spec, str) else list(spec or [])
    mapping: dict[str, str] = {}
    for item in (p.strip() for part in parts for p in part.split(",")):
        if not item:
            continue
        name, sep, column = (s.strip() for s in item.partition("="))
        if not sep or not name or not column:
            raise ValueError(f"--columns {item!r}: expected NAME=COLUMN (e.g. pred_lat=y_lat)")
        if name not in MAPPED_TARGETS:
            raise ValueError(f"--columns {item!r}: {name!r} is not one of {', '.join(MAPPED_TARGETS)}")
        if column in mapping:
            raise ValueError(f"--columns: column {column!r} is mapped twice")
        mapping[column] = MAPPED_TARGETS[name]
    return mapping


def renamed(data: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    """The row with each mapped column under its reader key (an explicit mapping wins over a
    column that already has that name)."""
    out = {k: v for k, v in data.items() if k not in mapping}
    for column, key in mapping.items():
        if column in data:
            out[key] = data[column]
    return out


def missing_columns(data: dict[str, Any], mapping: Mapping[str, str]) -> list[str]:
    """Mapped columns the row does not have (a typo in ``--columns`` stops before scoring)."""
    return [c for c in mapping if c not in data]
