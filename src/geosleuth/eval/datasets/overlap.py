"""`geosleuth datasets overlap A B`: the samples two datasets share, so a training set can be
shown disjoint from a benchmark (SpotAgent C.2).

Three ways to be the same sample: the same id; the same image file (SHA-256); or the same place
and the same picture size (a re-encoded or resized copy of one photo keeps its geotag and, with
resizing undone by the crawler, its size), coordinates within `NEAR_M` metres.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from geosleuth.bounds.imageio import header_size
from geosleuth.core.geo import haversine_km
from geosleuth.core.records import Sample
from geosleuth.eval.datasets.frozen import image_sha256

NEAR_M = 10.0
"""Coordinates this close count as one place (GPS noise, rounding in a released table)."""
_CELL_DEG = 0.001  # grid for the place join: a cell is about 111 m, so neighbours cover NEAR_M


@dataclass
class Overlap:
    """Shared samples: ids present in both, and (A id, B id) pairs by image and by place."""

    n_a: int
    n_b: int
    by_id: list[str] = field(default_factory=list)
    by_image: list[tuple[str, str]] = field(default_factory=list)
    by_place: list[tuple[str, str]] = field(default_factory=list)

    @property
    def any(self) -> bool:
        return bool(self.by_id or self.by_image or self.by_place)


def find_overlap(a: Sequence[Sample], b: Sequence[Sample], near_m: float = NEAR_M) -> Overlap:
    """Every sample of ``a`` that ``b`` also holds, by id, by image hash and by place and size."""
    result = Overlap(len(a), len(b))
    result.by_id = sorted({s.id for s in a} & {s.id for s in b})
    hashes_a, hashes_b = image_sha256(a), image_sha256(b)
    owners: dict[str, list[str]] = defaultdict(list)
    for sample_id, digest in hashes_b.items():
        owners[digest].append(sample_id)
    result.by_image = sorted((i, j) for i, digest in hashes_a.items() for j in owners.get(digest, ()))
    result.by_place = _same_place(a, b, near_m)
    return result


def _cell(lat: float, lon: float) -> tuple[int, int]:
    return math.floor(lat / _CELL_DEG), math.floor(lon / _CELL_DEG)


def _same_place(a: Sequence[Sample], b: Sequence[Sample], near_m: float) -> list[tuple[str, str]]:
    grid: dict[tuple[int, int], list[Sample]] = defaultdict(list)
    for s in b:
        if s.lat is not None and s.lon is not None:
            grid[_cell(s.lat, s.lon)].append(s)
    sizes: dict[str, tuple[int, int]] = {}  # by image path: the two datasets may reuse ids

    def size(s: Sample) -> tuple[int, int]:
        key = s.image or ""
        if key not in sizes:
            sizes[key] = header_size(key) if key else (0, 0)
        return sizes[key]

    pairs = []
    for s in a:
        if s.lat is None or s.lon is None:
            continue
        row, col = _cell(s.lat, s.lon)
        for other in (
            o for dr in (-1, 0, 1) for dc in (-1, 0, 1) for o in grid.get((row + dr, col + dc), ())
        ):
            close = float(haversine_km(s.lat, s.lon, other.lat, other.lon)) * 1000 <= near_m
            if close and size(s) != (0, 0) and size(s) == size(other):
                pairs.append((s.id, other.id))
    return sorted(pairs)
