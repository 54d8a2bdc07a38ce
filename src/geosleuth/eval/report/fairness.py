"""The fairness part of a run's summary: breakdowns by groupings of the truth, disparity, over-prediction.

`add_fairness` is the one call the report makes. It labels every score row with its groups
(`geosleuth.core.country_groups`; the settlement class needs the gazetteer), adds one breakdown
per grouping to ``summary["breakdowns"]`` with every accuracy's bootstrap 95 % interval (like the
headline figures) and the median km, and a ``summary["fairness"]`` block: per grouping its
description and `Disparity` of the headline accuracy, accuracy per truth country (the report's
choropleth), and the countries whose predicted cities have the lowest entropy. Accuracies in percent.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosleuth.core import metrics
from geosleuth.core.country_groups import (
    COUNTRY_GROUPINGS,
    DESCRIPTIONS,
    GROUPINGS,
    country_group,
    settlement_classes,
)
from geosleuth.core.fairness import (
    MIN_ENTROPY_N,
    MIN_GROUP_N,
    disparity,
    headline_threshold,
    prediction_entropy,
)
from geosleuth.core.text import normalize
from geosleuth.eval.report.scores import ScoreRow
from geosleuth.scoring.protocols import ScoringProtocol

log = logging.getLogger(__name__)

LOWEST_ENTROPY_SHOWN = 10
_GAZETTEER_ERRORS = (ImportError, AttributeError, OSError, RuntimeError)


def group_labels(rows: Sequence[ScoreRow]) -> tuple[dict[str, list[str | None]], list[str]]:
    """Each grouping's group per row (None: unassigned), and notes on groupings left empty."""
    labels: dict[str, list[str | None]] = {
        g: [country_group(g, r.country_code) for r in rows] for g in COUNTRY_GROUPINGS
    }
    notes: list[str] = []
    lat = np.fromiter((math.nan if r.true_lat is None else r.true_lat for r in rows), np.float64, len(rows))
    lon = np.fromiter((math.nan if r.true_lon is None else r.true_lon for r in rows), np.float64, len(rows))
    located = np.flatnonzero(np.isfinite(lat) & np.isfinite(lon))
    settlement: list[str | None] = [None] * len(rows)
    if located.size:
        try:
            from geosleuth.gazetteer import get_gazetteer

            population, dist = get_gazetteer().place_population_batch(lat[located], lon[located])
        except _GAZETTEER_ERRORS as exc:
            notes.append(f"settlement: no gazetteer to find the truth's place ({type(exc).__name__}: {exc})")
        else:
            for i, label in zip(located, settlement_classes(population, dist), strict=True):
                settlement[int(i)] = label
    labels["settlement"] = settlement
    return labels, notes


def headline_metric(rows: Sequence[ScoreRow], protocol: ScoringProtocol) -> tuple[str, np.ndarray] | None:
    """The accuracy a disparity compares and its per-row hits (None: row not scored by it).

    Distance protocols: Acc at `headline_threshold` (25 km, else the middle threshold); else
    country accuracy, else multiple-choice accuracy; None when the rows have none of these.
    """
    coords = [r.true_lat is not None and r.answer_type != "choice" for r in rows]
    if any(coords):
        km = headline_threshold(metrics.resolve_thresholds(protocol.thresholds))
        d = np.array([r.distance_km if c else np.nan for r, c in zip(rows, coords, strict=True)])
        hits = metrics.hits_at(d, km, protocol.strict_threshold).astype(object)
        hits[~np.array(coords)] = None
        return metrics.threshold_name(km), hits
    for name, of in (
        ("country_acc", lambda r: r.level_hits.get("country")),
        ("choice_acc", lambda r: r.choice_correct),
    ):
        values = np.array([of(r) for r in rows], dtype=object)
        if any(v is not None for v in values):
            return name, values
    return None


def _accuracy(hits: np.ndarray, seed: int) -> tuple[float | None, list[float | None]]:
    """An accuracy and its bootstrap 95 % interval, in percent (as the headline figures)."""
    lo, hi = metrics.bootstrap_ci(hits, seed=seed)
    return _round(100 * metrics.accuracy(hits)), [_round(100 * lo), _round(100 * hi)]


def _round(value: float) -> float | None:
    return round(float(value), 4) if np.isfinite(value) else None


@dataclass(frozen=True)
class RowArrays:
    """The per-row figures a breakdown group reads, as arrays (built once for every grouping)."""

    distance: np.ndarray  # km; NaN for a failure
    on_distance: np.ndarray  # scored by distance (a truth point, not multiple choice)
    level_hit: dict[str, np.ndarray]
    level_has: dict[str, np.ndarray]  # the truth has that level
    choice_hit: np.ndarray
    choice_has: np.ndarray

    @classmethod
    def of(cls, rows: Sequence[ScoreRow]) -> RowArrays:
        levels = {lv for r in rows for lv in r.level_hits}
        return cls(
            distance=np.array([r.distance_km for r in rows], dtype=np.float64),
            on_distance=np.array(
                [r.true_lat is not None and r.answer_type != "choice" for r in rows], dtype=bool
            ),
            level_hit={
                lv: np.array([r.level_hits.get(lv, False) for r in rows], dtype=bool) for lv in levels
            },
            level_has={lv: np.array([lv in r.level_hits for r in rows], dtype=bool) for lv in levels},
            choice_hit=np.array([bool(r.choice_correct) for r in rows], dtype=bool),
            choice_has=np.array([r.choice_correct is not None for r in rows], dtype=bool),
        )


def group_entry(arrays: RowArrays, index: np.ndarray, protocol: ScoringProtocol, seed: int) -> dict[str, Any]:
    """One breakdown group (rows ``index``): n, every accuracy of the headline table (percent) with
    its interval in ``ci95``, the GeoGuessr score, median and mean km. Same figures as
    ``summary.distance_metrics`` and ``level_metrics``, without the GeoGuessr interval (not an
    accuracy, and the costly one)."""
    entry: dict[str, Any] = {"n": int(index.size)}
    ci95: dict[str, list[float | None]] = {}
    d = arrays.distance[index[arrays.on_distance[index]]]
    if d.size:
        for km in metrics.resolve_thresholds(protocol.thresholds):
            name = metrics.threshold_name(km)
            entry[name], ci95[name] = _accuracy(metrics.hits_at(d, km, protocol.strict_threshold), seed)
        entry["geoguessr"] = _round(metrics.geoguessr_score(d))
        entry["median_km"] = _round(metrics.median_km(d))
        entry["mean_km"] = _round(metrics.mean_km(d))
        entry["answered"] = int(np.isfinite(d).sum())
    for level in metrics.PATH_LEVELS:
        if level in arrays.level_has:
            hits = arrays.level_hit[level][index[arrays.level_has[level][index]]]
            if hits.size:
                entry[f"{level}_acc"], ci95[f"{level}_acc"] = _accuracy(hits, seed)
    choices = arrays.choice_hit[index[arrays.choice_has[index]]]
    if choices.size:
        entry["choice_acc"], ci95["choice_acc"] = _accuracy(choices, seed)
    entry["ci95"] = ci95
    return entry


def fairness_breakdowns(
    rows: Sequence[ScoreRow],
    labels: Mapping[str, Sequence[str | None]],
    protocol: ScoringProtocol,
    seed: int = 0,
) -> dict[str, dict[str, dict[str, Any]]]:
    """One breakdown per grouping: its groups (sorted), each a `group_entry`."""
    arrays = RowArrays.of(rows)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for grouping, values in labels.items():
        codes = np.array(values, dtype=object)
        groups = sorted({v for v in values if v is not None})
        if groups:
            out[grouping] = {
                g: group_entry(arrays, np.flatnonzero(codes == g), protocol, seed) for g in groups
            }
    return out


def predicted_cities(rows: Sequence[ScoreRow]) -> list[str | None]:
    """The city each answer names: its coordinates' city by reverse geocoding ("Lyon, FR"), else
    the answer's own city text; None for no answer."""
    out: list[str | None] = [None] * len(rows)
    lat = np.fromiter((math.nan if r.pred_lat is None else r.pred_lat for r in rows), np.float64, len(rows))
    lon = np.fromiter((math.nan if r.pred_lon is None else r.pred_lon for r in rows), np.float64, len(rows))
    with_coords = np.flatnonzero(np.isfinite(lat) & np.isfinite(lon))
    if with_coords.size:
        try:
            from geosleuth.gazetteer import get_gazetteer

            found = get_gazetteer().reverse_batch(lat[with_coords], lon[with_coords])
        except _GAZETTEER_ERRORS as exc:
            log.info("over-prediction: no gazetteer (%s); answers' city texts only", exc)
        else:
            names: dict[tuple[str, str], str] = {}  # one string per place, not one per row
            for i, city, cc in zip(with_coords, found["city"], found["country_code"], strict=True):
                out[int(i)] = names.setdefault((city, cc), f"{city}, {cc}") if city else None
    for i, row in enumerate(rows):
        city = row.pred_city if out[i] is None else None
        if city and normalize(city):
            out[i] = normalize(city)
    return out


def _pct(hits: Sequence[Any]) -> float | None:
    scored = [bool(h) for h in hits if h is not None]
    return round(100.0 * float(np.mean(scored)), 4) if scored else None


def fairness_block(
    rows: Sequence[ScoreRow],
    labels: Mapping[str, Sequence[str | None]],
    protocol: ScoringProtocol,
    seed: int = 0,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """``summary["fairness"]``: metric, per-grouping disparity, accuracy per country, over-prediction."""
    block: dict[str, Any] = {"groupings": {}, "notes": list(notes)}
    headline = headline_metric(rows, protocol)
    if headline is None:
        block["notes"].append("no accuracy to compare across groups (no scored sample)")
        return block
    name, hits = headline
    block["metric"] = name
    block["min_group_n"] = MIN_GROUP_N
    overall = _pct(list(hits))
    for grouping, values in labels.items():
        by_group: dict[str, list[bool]] = defaultdict(list)
        for value, hit in zip(values, hits, strict=True):
            if value is not None and hit is not None:
                by_group[value].append(bool(hit))
        result = disparity(by_group, name, overall, seed=seed)
        block["groupings"][grouping] = {
            "description": DESCRIPTIONS[grouping],
            "n_assigned": int(sum(v is not None for v in values)),
            "n_unassigned": int(sum(v is None for v in values)),
            "disparity": result.as_dict() if result else None,
        }
        if result is None:
            block["notes"].append(
                f"{grouping}: fewer than two groups of {MIN_GROUP_N} samples or more, so no disparity"
            )
    by_country: dict[str, list[Any]] = defaultdict(list)
    for row, hit in zip(rows, hits, strict=True):
        if row.country_code and hit is not None:
            by_country[row.country_code].append(hit)
    block["by_country"] = {cc: {"n": len(h), "value": _pct(h)} for cc, h in sorted(by_country.items())}
    entropy = prediction_entropy([r.country_code for r in rows], predicted_cities(rows))
    block["over_prediction"] = {
        "min_n": MIN_ENTROPY_N,
        "n_countries": len(entropy),
        "lowest_entropy": [
            {
                "country": e.country,
                "n": e.n,
                "entropy": round(e.entropy, 4),
                "distinct_cities": e.distinct,
                "top_city": e.top_city,
                "top_share": round(e.top_share, 4),
            }
            for e in entropy[:LOWEST_ENTROPY_SHOWN]
        ],
    }
    return block


def add_fairness(
    summary: dict[str, Any],
    rows: Sequence[ScoreRow],
    protocol: ScoringProtocol,
    seed: int = 0,
) -> None:
    """Add the grouping breakdowns and the ``fairness`` block to a (percent) summary."""
    labels, notes = group_labels(rows)
    summary.setdefault("breakdowns", {}).update(fairness_breakdowns(rows, labels, protocol, seed))
    summary["fairness"] = fairness_block(rows, labels, protocol, seed, notes)


__all__ = ["GROUPINGS", "add_fairness", "fairness_block", "fairness_breakdowns", "group_labels"]
