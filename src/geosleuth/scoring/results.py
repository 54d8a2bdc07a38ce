"""What scoring a file gives: the summary numbers, the per-row arrays they come from and the
per-row records ``--rows`` prints (built from compact columns, one at a time)."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.records import ParseStatus

STATUSES: tuple[ParseStatus, ...] = tuple(ParseStatus)
"""Parse statuses by the int8 code a status column stores."""


@dataclass
class Score:
    """Numbers for one file (or one group). Accuracies in percent (0–100), distances in km."""

    n: int
    parsed: int
    metrics: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    warnings: list[str] = field(default_factory=list)
    groups: dict[str, Score] = field(default_factory=dict)
    disparity: dict[str, Any] | None = None  # across the groups of a grouping of the truth (income, …)

    def to_dict(self, include_warnings: bool = True) -> dict[str, Any]:
        """The JSON shape of ``geosleuth score --format json`` (NaN becomes null)."""
        out: dict[str, Any] = {
            "n": self.n,
            "parsed": self.parsed,
            "metrics": {k: _round(k, v) for k, v in self.metrics.items()},
            "ci95": {k: [_round(k, lo), _round(k, hi)] for k, (lo, hi) in self.ci95.items()},
        }
        if include_warnings:
            out["warnings"] = list(self.warnings)
        if self.groups:
            out["groups"] = {k: g.to_dict(include_warnings=False) for k, g in self.groups.items()}
        if self.disparity is not None:
            out["disparity"] = self.disparity
        return out


def _round(name: str, value: float) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 3 if name.endswith("_km") else 2)


@dataclass
class ScoreArrays:
    """Per-row arrays every summary is computed from."""

    distances: NDArray[np.float64]
    parsed: NDArray[np.bool_]
    hits: dict[str, NDArray[np.bool_]]
    scored: dict[str, NDArray[np.bool_]]  # rows a metric is defined on (truth label present, …)
    points: dict[str, NDArray[np.float64]]
    pred_levels: dict[str, NDArray[np.object_]]
    distance_metrics: bool = True  # False when no row has true coordinates (e.g. multiple choice)
    published: NDArray[np.bool_] | None = None  # rows a protocol's released code keeps for distances
    predicted: tuple[NDArray[np.float64], NDArray[np.float64]] | None = None  # (lat, lon), NaN: none


@dataclass
class RowColumns:
    """What ``--rows`` prints, as columns (no per-row dicts are kept while scoring)."""

    line: NDArray[np.int32]
    status: NDArray[np.int8]
    coords: tuple[NDArray[np.float64], ...]  # pred lat, pred lon, true lat, true lon
    ids: Sequence[str | None]
    formats: Sequence[str | None]
    recovered: Sequence[str | None]
    problems: dict[int, str]


@dataclass
class FileScore:
    """A scored file: the summary plus, when asked for, per-row columns."""

    path: str
    protocol: str
    score: Score
    arrays: ScoreArrays | None = None
    columns: RowColumns | None = None
    records: list[dict[str, Any]] | None = None  # per-row records of a benchmark's own file scorer

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """Per-row records (``--rows``), built one at a time from the columns."""
        if self.records is not None:
            yield from self.records
            return
        if self.columns is None or self.arrays is None:
            return
        c, a = self.columns, self.arrays
        plat, plon, tlat, tlon = c.coords
        for i in range(len(c.line)):
            rec: dict[str, Any] = {
                "id": c.ids[i],
                "line": int(c.line[i]),
                "status": STATUSES[c.status[i]].value,
                "format": c.formats[i],
                "pred_lat": _num(plat[i]),
                "pred_lon": _num(plon[i]),
                "true_lat": _num(tlat[i]),
                "true_lon": _num(tlon[i]),
                "distance_km": _num(a.distances[i]),
            }
            for name, p in a.points.items():
                rec[name] = float(p[i])
            for key, values in a.pred_levels.items():
                rec[f"pred_{key}"] = values[i]
            for name, h in a.hits.items():
                rec[name] = bool(h[i]) if name not in a.scored or a.scored[name][i] else None
            rec["recovered"] = c.recovered[i]
            rec["problem"] = c.problems.get(i)
            yield rec

    @property
    def rows(self) -> list[dict[str, Any]]:
        """All per-row records (empty unless scored with ``keep_rows``)."""
        return list(self.iter_rows())


def _num(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
