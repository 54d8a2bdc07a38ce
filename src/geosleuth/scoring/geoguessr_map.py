"""GeoGuessr-map scoring as ccmdi's GeoBench computes it (``geobench.py``): pure rules, no I/O.

* A map's scale is the haversine diagonal of its bounds (the ``haversine`` package: mean Earth
  radius 6371.0088 km) divided by 7.458421.
* A guess within 25 m scores 5000; otherwise round(5000 · 0.99866017^(metres / scale)), Python's
  round (half to even), metres computed as the released code does, (km / 1000) · 1,000,000.
* ``refusal_rate`` and ``acc_country`` are over all rows (a refusal is never country-correct);
  ``geoguessr_mean``, ``geoguessr_median``, ``mean_km`` and ``median_km`` over answered rows, the
  median being ``sorted(x)[n // 2]`` (the upper middle value for even n), as GeoBench takes it.
* Countries are equal through GeoBench's alias groups (:mod:`geosleuth.scoring.geobench_countries`).

Accuracy and refusal rate are percentages here, like every accuracy geosleuth reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core import metrics
from geosleuth.scoring.geobench_countries import COUNTRY_GROUPS

HAVERSINE_RADIUS_KM = 6371.0088
"""The ``haversine`` package's mean Earth radius (``_AVG_EARTH_RADIUS_KM``)."""
SCALE_DIVISOR = 7.458421
DECAY = 0.99866017
FULL_POINTS = 5000
FULL_WITHIN_M = 25.0

_CANONICAL: dict[str, str] = {}
for _group in COUNTRY_GROUPS:
    for _name in _group:
        _CANONICAL[_name.lower()] = _group[0]  # a later group wins a shared name, as the released dict


@dataclass(frozen=True)
class MapBounds:
    """A GeoGuessr map's bounding box, as GeoBench's ``metadata.json`` stores ``bounds``."""

    min_lat: float
    min_lng: float
    max_lat: float
    max_lng: float

    def __post_init__(self) -> None:
        for name, value, limit in (
            ("min_lat", self.min_lat, 90.0),
            ("max_lat", self.max_lat, 90.0),
            ("min_lng", self.min_lng, 180.0),
            ("max_lng", self.max_lng, 180.0),
        ):
            if not (math.isfinite(value) and -limit <= value <= limit):
                raise ValueError(f"map bounds: {name} {value} is outside [-{limit:g}, {limit:g}]")
        if self.diagonal_km() <= 0.0:
            raise ValueError("map bounds: the two corners are the same point (the map has no size)")

    def diagonal_km(self) -> float:
        """Haversine distance from the (min_lat, min_lng) corner to (max_lat, max_lng)."""
        lat1, lng1, lat2, lng2 = map(math.radians, (self.min_lat, self.min_lng, self.max_lat, self.max_lng))
        h = (
            math.sin((lat2 - lat1) / 2) ** 2
            + math.cos(lat1) * math.cos(lat2) * math.sin((lng2 - lng1) / 2) ** 2
        )
        return HAVERSINE_RADIUS_KM * (2 * math.asin(math.sqrt(h)))  # the package's order of operations

    @property
    def scale(self) -> float:
        """GeoBench's ``self.scale``: the diagonal over 7.458421 (km)."""
        return self.diagonal_km() / SCALE_DIVISOR


def parse_bounds(text: str) -> MapBounds:
    """``MIN_LAT,MIN_LNG,MAX_LAT,MAX_LNG`` as given to ``--map-bounds``."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 4:
        raise ValueError(f"--map-bounds {text!r}: expected MIN_LAT,MIN_LNG,MAX_LAT,MAX_LNG (four numbers)")
    return MapBounds(*values)


def haversine_km(lat1: ArrayLike, lng1: ArrayLike, lat2: ArrayLike, lng2: ArrayLike) -> NDArray[np.float64]:
    """The ``haversine`` package's formula, vectorised (NaN in, NaN out)."""
    la1, lo1, la2, lo2 = (np.radians(np.asarray(v, dtype=np.float64)) for v in (lat1, lng1, lat2, lng2))
    h = np.sin((la2 - la1) / 2) ** 2 + np.cos(la1) * np.cos(la2) * np.sin((lo2 - lo1) / 2) ** 2
    return HAVERSINE_RADIUS_KM * (2 * np.arcsin(np.sqrt(np.clip(h, 0.0, 1.0))))


def points(distance_km: ArrayLike, scale: float) -> NDArray[np.float64]:
    """GeoBench's ``calculate_score`` per guess (NaN distance: NaN points)."""
    metres = np.asarray(distance_km, dtype=np.float64) / 1000 * 1000000
    with np.errstate(invalid="ignore"):
        decayed = np.round(FULL_POINTS * np.power(DECAY, metres / scale))  # rint: half to even
        return np.where(metres <= FULL_WITHIN_M, float(FULL_POINTS), decayed)


def same_country(first: str | None, second: str | None) -> bool:
    """GeoBench's ``are_same_country``: equal trimmed lower-case names, or one alias group."""
    if not first or not second:
        return False
    a, b = first.strip().lower(), second.strip().lower()
    if a == b:
        return True
    return a in _CANONICAL and b in _CANONICAL and _CANONICAL[a] == _CANONICAL[b]


def upper_median(values: NDArray[np.float64]) -> float:
    """``sorted(x)[len(x) // 2]``."""
    return float(np.sort(values)[values.size // 2])


@dataclass(frozen=True)
class MapFigures:
    """The figures of one file on one map; ``None`` where no row was answered."""

    n: int
    answered: int
    values: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    notes: list[str]


def map_figures(
    refused: NDArray[np.bool_],
    distance_km: NDArray[np.float64],
    country_correct: NDArray[np.bool_],
    bounds: MapBounds,
    seed: int = 0,
) -> MapFigures:
    """The leaderboard's figures over rows (``distance_km`` is read where not refused)."""
    n = int(refused.size)
    correct = country_correct & ~refused
    values: dict[str, float] = {
        "refusal_rate": 100.0 * float(refused.mean()) if n else math.nan,
        "acc_country": 100.0 * float(correct.mean()) if n else math.nan,
    }
    ci: dict[str, tuple[float, float]] = {}
    if n:
        lo, hi = metrics.bootstrap_ci(correct, seed=seed)
        ci["acc_country"] = (100.0 * lo, 100.0 * hi)
    answered = distance_km[~refused]
    notes = []
    if answered.size:
        score = points(answered, bounds.scale)
        values |= {
            "geoguessr_mean": float(score.mean()),
            "geoguessr_median": upper_median(score),
            "mean_km": float(answered.mean()),
            "median_km": upper_median(answered),
        }
        ci["geoguessr_mean"] = metrics.bootstrap_ci_mean(score, seed=seed)
    else:
        notes.append(
            "no row was answered: geoguessr_mean, geoguessr_median, mean_km and median_km are absent"
        )
    values["map_diagonal_km"] = bounds.diagonal_km()
    return MapFigures(n, int(answered.size), values, ci, notes)
