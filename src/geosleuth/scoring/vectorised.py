"""Vectorised scoring: predicted against true coordinates, whole arrays at a time, into per-row
hits and points (distances, thresholds, reverse-geocoded levels, GeoGuessr / GeoScore) and the
summary metrics with their bootstrap intervals."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike, NDArray

import geosleuth.scoring.geovista as geovista
from geosleuth.core import metrics as core_metrics
from geosleuth.core.geo import distance_km
from geosleuth.core.released import GEOAGENT_RADIUS_KM
from geosleuth.scoring.columnstore import Growing
from geosleuth.scoring.peers import polygon_country_hits, released_points
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.results import Score, ScoreArrays

ReverseFn = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, ArrayLike]]
"""``(lats, lons) -> {key: array}``: the gazetteer's ``reverse_batch`` / ``reverse_geocoder_batch``."""
N_BOOT = 1000
"""Bootstrap resamples behind each 95 % interval."""
VECTOR_CHUNK = 65_536
"""Rows per vectorised step when scoring whole arrays (distances, reverse geocoding)."""


def _reverse_levels(
    reverse: ReverseFn, lats: NDArray[np.float64], lons: NDArray[np.float64], keys: Sequence[str]
) -> dict[str, NDArray[np.object_]]:
    """Reverse-geocode the finite points only, in chunks; other rows get empty labels."""
    out = {k: np.full(lats.shape, "", dtype=object) for k in keys}
    ok = np.flatnonzero(np.isfinite(lats) & np.isfinite(lons))
    for start in range(0, ok.size, VECTOR_CHUNK):
        rows = ok[start : start + VECTOR_CHUNK]
        found = reverse(lats[rows], lons[rows])
        for k in keys:
            values = np.array(found[k], dtype=object).reshape(-1)
            values[values == None] = ""  # noqa: E711 - elementwise None test
            out[k][rows] = values
    return out


@dataclass
class CoordChunk:
    """Distances and coordinate-level hits of consecutive rows (predicted vs true coordinates)."""

    d: NDArray[np.float64]
    level_hits: dict[str, NDArray[np.bool_]]  # metric -> hit, already requiring both points
    pred_levels: dict[str, NDArray[np.object_]]
    points: dict[str, NDArray[np.float64]] = field(default_factory=dict)


def coordinate_chunk(
    plat: NDArray[np.float64],
    plon: NDArray[np.float64],
    tlat: NDArray[np.float64],
    tlon: NDArray[np.float64],
    protocol: ScoringProtocol,
    reverse: ReverseFn | None,
    truth_levels: Mapping[str, NDArray[np.object_]] | None = None,
    has_labels: NDArray[np.bool_] | None = None,
    keep_pred_levels: bool = True,
) -> CoordChunk:
    """One vectorised step: distances, and levels by reverse-geocoding prediction and truth."""
    d = np.asarray(
        distance_km(plat, plon, tlat, tlon, method=protocol.distance, radius_km=protocol.radius_km),
        dtype=np.float64,
    ).reshape(-1)
    level_hits: dict[str, NDArray[np.bool_]] = {}
    pred_levels: dict[str, NDArray[np.object_]] = {}
    points: dict[str, NDArray[np.float64]] = {}
    if protocol.geoguessr:
        points["geoguessr"] = core_metrics.geoguessr_points(d)
        if protocol.geoguessr_round:
            points["geoguessr"] = np.round(points["geoguessr"])
    if protocol.geoscore:  # GeoAgent measures on R = 6371 km (paper Table 5, released code)
        same = protocol.distance == "haversine" and protocol.radius_km == GEOAGENT_RADIUS_KM
        d_geo = d if same else distance_km(plat, plon, tlat, tlon, radius_km=GEOAGENT_RADIUS_KM).reshape(-1)
        points["geoscore"] = core_metrics.geoscore_points(d_geo)
    if protocol.reverse == "polygon" and d.size:  # PIGEON: reverse is the gazetteer's country_batch
        hits = polygon_country_hits(reverse, plat, plon, tlat, tlon)  # type: ignore[arg-type]
        level_hits = {metric: hits for metric, _ in protocol.coord_levels}
    elif protocol.coord_levels and d.size:
        assert reverse is not None
        keys = [k for _, k in protocol.coord_levels]
        valid = np.isfinite(plat) & np.isfinite(plon)
        has_truth = np.isfinite(tlat) & np.isfinite(tlon)
        if has_labels is not None and truth_levels is not None:
            has_truth |= has_labels
        if truth_levels is None:  # one reverse-geocoding pass over predictions and truth together
            both = _reverse_levels(reverse, np.concatenate([plat, tlat]), np.concatenate([plon, tlon]), keys)
            pred = {k: v[: plat.size] for k, v in both.items()}
            true = {k: v[plat.size :] for k, v in both.items()}
        else:
            pred = _reverse_levels(reverse, plat, plon, keys)
            true = {k: np.asarray(truth_levels[k], dtype=object) for k in keys}
        if protocol.nested_levels:
            hits = core_metrics.level_hits_from_coordinates(pred, true, keys)
        else:
            hits = {k: core_metrics.label_hits(pred[k], true[k]) for k in keys}
        for metric, key in protocol.coord_levels:
            level_hits[metric] = hits[key] & valid & has_truth
        if keep_pred_levels:
            pred_levels = pred
    return CoordChunk(d, level_hits, pred_levels, points)


class CoordColumns:
    """Coordinate chunks appended, as they are scored, to growing columns (memory maps of their
    own): nothing is joined at the end, so no chunk's memory is left behind as a hole in the heap.
    Every chunk carries the first one's level hits and points."""

    def __init__(self) -> None:
        self.n_chunks = 0
        self.d = Growing(np.float64)
        self.level_hits: dict[str, Growing] = {}
        self.points: dict[str, Growing] = {}
        self.pred_levels: dict[str, list[NDArray[np.object_]]] = {}

    def add(self, chunk: CoordChunk) -> None:
        if not self.n_chunks:
            self.level_hits = {name: Growing(bool) for name in chunk.level_hits}
            self.points = {name: Growing(np.float64) for name in chunk.points}
            self.pred_levels = {key: [] for key in chunk.pred_levels}
        self.d.extend(chunk.d)
        for name, column in self.level_hits.items():
            column.extend(chunk.level_hits[name])
        for name, column in self.points.items():
            column.extend(chunk.points[name])
        for key, parts in self.pred_levels.items():
            parts.append(chunk.pred_levels[key])
        self.n_chunks += 1


def assemble(columns: CoordColumns, protocol: ScoringProtocol, parsed: NDArray[np.bool_]) -> ScoreArrays:
    """The scored chunks -> one ScoreArrays with threshold hits and points."""
    if not columns.n_chunks:  # an empty file: every metric is defined on nothing, by the same chunk step
        empty = np.zeros(0)
        columns.add(coordinate_chunk(empty, empty, empty, empty, protocol, None))
    d = columns.d.array()
    hits: dict[str, NDArray[np.bool_]] = {}
    for t in protocol.thresholds:
        hits[core_metrics.threshold_name(t)] = core_metrics.hits_at(d, t, protocol.strict_threshold)
    points = {name: column.array() for name, column in columns.points.items()}
    for metric, _ in protocol.coord_levels if columns.level_hits else ():
        hits[metric] = columns.level_hits[metric].array()
    pred_levels = {key: np.concatenate(parts) for key, parts in columns.pred_levels.items()}
    columns.pred_levels = {}
    return ScoreArrays(d, parsed, hits, {}, points, pred_levels)


def arrays_from_coordinates(
    plat: ArrayLike,
    plon: ArrayLike,
    tlat: ArrayLike,
    tlon: ArrayLike,
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
    parsed: NDArray[np.bool_] | None = None,
    truth_levels: Mapping[str, NDArray[np.object_]] | None = None,
    has_labels: NDArray[np.bool_] | None = None,
    keep_pred_levels: bool = True,
) -> ScoreArrays:
    """The vectorised core: predicted vs true coordinates (NaN = failed) -> per-row hits and points."""
    plat, plon, tlat, tlon = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (plat, plon, tlat, tlon))
    answered = np.isfinite(plat) & np.isfinite(plon)
    plat, plon = released_points(protocol, plat, plon)  # G3: out of range -> 0, no answer -> (0, 0)
    if protocol.coord_levels and plat.size:
        reverse = reverse or default_reverse(protocol)
    chunks = CoordColumns()
    for start in range(0, plat.size, VECTOR_CHUNK):
        s = slice(start, start + VECTOR_CHUNK)
        chunks.add(
            coordinate_chunk(
                plat[s],
                plon[s],
                tlat[s],
                tlon[s],
                protocol,
                reverse,
                None if truth_levels is None else {k: v[s] for k, v in truth_levels.items()},
                None if has_labels is None else has_labels[s],
                keep_pred_levels,
            )
        )
    return assemble(chunks, protocol, answered if parsed is None else parsed)


def score_coordinates(
    plat: ArrayLike,
    plon: ArrayLike,
    tlat: ArrayLike,
    tlon: ArrayLike,
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
) -> Score:
    """Score coordinate arrays directly (no files): the path evaluation and benchmarks use."""
    return summarize(
        arrays_from_coordinates(plat, plon, tlat, tlon, protocol, reverse, keep_pred_levels=False), protocol
    )


def summarize(arrays: ScoreArrays, protocol: ScoringProtocol, index: NDArray[np.intp] | None = None) -> Score:
    """Metrics, CIs and counts over all rows or a subset (a ``--by`` group)."""
    sel = slice(None) if index is None else index
    d = arrays.distances[sel]
    n = int(d.size)
    metrics: dict[str, float] = {}
    ci95: dict[str, tuple[float, float]] = {}
    for name, h in arrays.hits.items():
        h_sel = h[sel]
        if name in arrays.scored:
            h_sel = h_sel[arrays.scored[name][sel]]
        metrics[name] = 100.0 * core_metrics.accuracy(h_sel)
        lo, hi = core_metrics.bootstrap_ci(h_sel, n_boot=N_BOOT, seed=0)
        ci95[name] = (100.0 * lo, 100.0 * hi)
    if arrays.distance_metrics:
        if protocol.median_mean:  # = core_metrics.median_km / core_metrics.mean_km, with one charged copy
            charged = core_metrics.charged_distances(d)
            mean = float(charged.mean()) if charged.size else math.nan
            metrics["median_km"] = core_metrics.median_finite(charged, in_place=True)
            metrics["mean_km"] = mean
        if protocol.median == "lower":
            if arrays.published is not None:
                metrics["median_km"] = geovista.lower_median(d[arrays.published[sel]])
                metrics["all_median_km"] = geovista.lower_median(core_metrics.charged_distances(d))
            else:
                metrics["median_km"] = geovista.lower_median(core_metrics.charged_distances(d))
    for name, p in arrays.points.items():
        values = p[sel]
        metrics[name] = float(values.mean()) if values.size else math.nan
    return Score(n=n, parsed=int(arrays.parsed[sel].sum()), metrics=_ordered(metrics), ci95=ci95)


def _ordered(metrics: dict[str, float]) -> dict[str, float]:
    """Distance thresholds ascending first (as published, then every row), then the rest."""

    def km(k: str) -> float:
        return float(k.split("@", 1)[1][:-2])

    dist = sorted((k for k in metrics if k.startswith("acc@")), key=km)
    every = sorted((k for k in metrics if k.startswith("all_acc@")), key=km)
    rest = {k: v for k, v in metrics.items() if k not in dist and k not in every}
    return {**{k: metrics[k] for k in dist}, **{k: metrics[k] for k in every}, **rest}


def default_reverse(protocol: ScoringProtocol) -> ReverseFn:
    """The offline gazetteer's reverse geocoder with the semantics the protocol names."""
    from geosleuth.gazetteer import get_gazetteer

    gazetteer = get_gazetteer()
    if protocol.reverse == "reverse_geocoder":
        return gazetteer.reverse_geocoder_batch  # type: ignore[no-any-return]
    if protocol.reverse == "polygon":
        return gazetteer.country_batch  # type: ignore[no-any-return]
    return gazetteer.reverse_batch  # type: ignore[no-any-return]
