"""The fairness part of a run's summary: breakdowns by groupings of the truth, disparity, over-prediction.

`add_fairness` is the one call the report makes. It gives every sample its group under each
grouping (`geosleuth.core.country_groups`; the settlement class needs the gazetteer), adds one
breakdown per grouping to ``summary["breakdowns"]`` with every accuracy's bootstrap 95 % interval
(like the headline figures) and the median km, and a ``summary["fairness"]`` block: per grouping
its description and `Disparity` of the headline accuracy, accuracy per truth country (the report's
choropleth), and the countries whose predicted cities have the lowest entropy. Accuracies in percent.

Everything is read from the scored run's arrays (`RunScore`): groups, hits, countries and
predicted cities are small integer codes per sample, never a Python object per sample, so a
million-sample run costs a few bytes a sample here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

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
    entropy_ranking,
    headline_threshold,
)
from geosleuth.core.text import normalize
from geosleuth.eval.report.scores import CHUNK_ROWS, RunScore
from geosleuth.scoring.protocols import ScoringProtocol

log = logging.getLogger(__name__)

LOWEST_ENTROPY_SHOWN = 10
MAX_CACHED_NAMES = 100_000
_GAZETTEER_ERRORS = (ImportError, AttributeError, OSError, RuntimeError)


@dataclass(frozen=True)
class Grouping:
    """Each sample's group under one grouping: ``codes[i]`` indexes ``names`` (sorted, every
    one held by a sample), -1 for a sample the grouping leaves unassigned."""

    codes: NDArray[np.int16]
    names: list[str]

    @classmethod
    def of(cls, raw: NDArray[np.integer[Any]], labels: list[str | None]) -> Grouping:
        """From codes into ``labels`` (a None label, or a code of -1: unassigned), renumbered so
        that the names are sorted and each is used."""
        used = np.zeros(len(labels), dtype=bool)
        used[np.unique(raw[raw >= 0])] = True
        names = sorted({label for label, u in zip(labels, used, strict=True) if u and label is not None})
        at = {name: k for k, name in enumerate(names)}
        remap = np.array([*(at.get(label, -1) if label else -1 for label in labels), -1], dtype=np.int16)
        return cls(remap[raw], names)  # code -1 reads remap's last entry: still -1

    def members(self, mask: NDArray[np.bool_] | None = None) -> Iterator[tuple[str, NDArray[np.intp]]]:
        """Each group's name and samples (ascending), among ``mask`` when given, one group at a
        time (a comparison per group: index arrays never outnumber one group's samples)."""
        for k, name in enumerate(self.names):
            here = self.codes == k
            yield name, np.flatnonzero(here if mask is None else here & mask)


def group_codes(scored: RunScore) -> tuple[dict[str, Grouping], list[str]]:
    """Each grouping's `Grouping` of the samples, and notes on groupings left empty.

    A country grouping is a lookup per distinct truth country; the settlement class comes from
    the population of the place each truth point belongs to (the gazetteer, in chunks)."""
    country = scored.columns.country
    countries = country.column.array()
    out: dict[str, Grouping] = {}
    for name in COUNTRY_GROUPINGS:
        out[name] = Grouping.of(countries, [country_group(name, code or None) for code in country.table])
    notes: list[str] = []
    settlement, note = _settlement(scored)
    if note:
        notes.append(note)
    out["settlement"] = settlement
    return out, notes


def _settlement(scored: RunScore) -> tuple[Grouping, str | None]:
    """Each truth point's settlement class (unassigned without a point or a gazetteer)."""
    lat, lon = scored.columns.column("true_lat"), scored.columns.column("true_lon")
    raw = np.full(lat.size, -1, dtype=np.int16)
    labels: list[str | None] = []
    at: dict[str, int] = {}
    if (np.isfinite(lat) & np.isfinite(lon)).any():
        try:
            from geosleuth.gazetteer import get_gazetteer

            gazetteer = get_gazetteer()
            for rows in _chunks(np.isfinite(lat) & np.isfinite(lon)):
                population, dist = gazetteer.place_population_batch(lat[rows], lon[rows])
                classes = settlement_classes(population, dist)
                for label in {c for c in classes if c is not None}:
                    if label not in at:
                        at[label] = len(labels)
                        labels.append(label)
                    raw[rows[classes == label]] = at[label]
        except _GAZETTEER_ERRORS as exc:
            note = f"settlement: no gazetteer to find the truth's place ({type(exc).__name__}: {exc})"
            return Grouping.of(np.full(lat.size, -1, dtype=np.int16), []), note
    return Grouping.of(raw, labels), None


def _chunks(mask: NDArray[np.bool_]) -> Iterator[NDArray[np.intp]]:
    """The samples where ``mask`` is set, `CHUNK_ROWS` samples at a time (an index array per
    chunk, never one over the run)."""
    for start in range(0, mask.size, CHUNK_ROWS):
        rows = start + np.flatnonzero(mask[start : start + CHUNK_ROWS])
        if rows.size:
            yield rows


@dataclass(frozen=True)
class RowArrays:
    """The per-sample figures a breakdown group reads, as arrays (built once for every grouping)."""

    distance: NDArray[np.float64]  # km; NaN for a failure
    on_distance: NDArray[np.bool_]  # scored by distance (a truth point, not multiple choice)
    level_hit: dict[str, NDArray[np.bool_]]
    level_has: dict[str, NDArray[np.bool_]]  # the truth has that level
    choice_hit: NDArray[np.bool_]
    choice_has: NDArray[np.bool_]

    @classmethod
    def of(cls, scored: RunScore) -> RowArrays:
        """From the engine's per-row hits: a level's hit is the first of its figures
        (``acc_country``, ``text_acc_country``, in the engine's order) defined on the sample."""
        arrays = scored.file.arrays
        assert arrays is not None
        columns = scored.columns
        n = scored.n
        choice = columns.answer_type.codes.get("choice", -1)
        level_hit: dict[str, NDArray[np.bool_]] = {}
        level_has: dict[str, NDArray[np.bool_]] = {}
        for name, hits in arrays.hits.items():
            if not name.startswith(("acc_", "text_acc_")) or name.endswith("_choice"):
                continue
            level = name.removeprefix("text_").removeprefix("acc_")
            defined = arrays.scored.get(name, np.ones(n, dtype=bool))
            hit = level_hit.setdefault(level, np.zeros(n, dtype=bool))
            has = level_has.setdefault(level, np.zeros(n, dtype=bool))
            new = defined & ~has
            hit[new] = hits[new]
            has |= defined
        for level in [lv for lv, has in level_has.items() if not has.any()]:
            del level_hit[level], level_has[level]
        choice_has = np.zeros(n, dtype=bool)
        choice_hit = np.zeros(n, dtype=bool)
        if "acc_choice" in arrays.hits:
            choice_has = arrays.scored.get("acc_choice", np.ones(n, dtype=bool)).copy()
            choice_hit = arrays.hits["acc_choice"] & choice_has
        return cls(
            distance=scored.distances,
            on_distance=np.isfinite(columns.column("true_lat"))
            & (columns.answer_type.column.array() != choice),
            level_hit=level_hit,
            level_has=level_has,
            choice_hit=choice_hit,
            choice_has=choice_has,
        )


@dataclass(frozen=True)
class Headline:
    """The accuracy a disparity compares: its name, per-sample hits, and the samples it scores."""

    name: str
    hit: NDArray[np.bool_]
    has: NDArray[np.bool_]


def headline_metric(arrays: RowArrays, protocol: ScoringProtocol) -> Headline | None:
    """Distance protocols: Acc at `headline_threshold` (25 km, else the middle threshold); else
    country accuracy, else multiple-choice accuracy; None when the samples have none of these."""
    if arrays.on_distance.any():
        km = headline_threshold(metrics.resolve_thresholds(protocol.thresholds))
        hits = metrics.hits_at(arrays.distance, km, protocol.strict_threshold) & arrays.on_distance
        return Headline(metrics.threshold_name(km), hits, arrays.on_distance)
    if "country" in arrays.level_has:
        return Headline("country_acc", arrays.level_hit["country"], arrays.level_has["country"])
    if arrays.choice_has.any():
        return Headline("choice_acc", arrays.choice_hit, arrays.choice_has)
    return None


def _accuracy(hits: np.ndarray, seed: int) -> tuple[float | None, list[float | None]]:
    """An accuracy and its bootstrap 95 % interval, in percent (as the headline figures)."""
    lo, hi = metrics.bootstrap_ci(hits, seed=seed)
    return _round(100 * metrics.accuracy(hits)), [_round(100 * lo), _round(100 * hi)]


def _round(value: float) -> float | None:
    return round(float(value), 4) if np.isfinite(value) else None


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
    arrays: RowArrays, groupings: dict[str, Grouping], protocol: ScoringProtocol, seed: int = 0
) -> dict[str, dict[str, dict[str, Any]]]:
    """One breakdown per grouping: its groups (sorted), each a `group_entry`."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for name, grouping in groupings.items():
        if grouping.names:
            out[name] = {
                group: group_entry(arrays, rows, protocol, seed) for group, rows in grouping.members()
            }
    return out


def predicted_cities(scored: RunScore) -> tuple[NDArray[np.int32], list[str]]:
    """The city each answer names, as a code into a table of names (-1: none): its coordinates'
    city by reverse geocoding ("Lyon, FR"), else the answer's own city text, folded."""
    table: dict[str, int] = {}
    codes = np.full(scored.n, -1, dtype=np.int32)
    points = scored.predicted
    if points is not None:
        try:
            _reverse_cities(points[0], points[1], codes, table)
        except _GAZETTEER_ERRORS as exc:
            log.info("over-prediction: no gazetteer (%s); answers' city texts only", exc)
            codes[:] = -1
            table.clear()
    texts = scored.columns.pred_city
    folded = lru_cache(maxsize=MAX_CACHED_NAMES)(normalize)
    for rows in _chunks(codes < 0):
        for i in rows.tolist():
            city = texts[i]
            key = folded(city) if city else ""
            if key:
                codes[i] = table.setdefault(key, len(table))
    return codes, list(table)


def _reverse_cities(
    lat: NDArray[np.float64],
    lon: NDArray[np.float64],
    codes: NDArray[np.int32],
    table: dict[str, int],
) -> None:
    """Code the city of each located answer, reverse-geocoded in chunks."""
    from geosleuth.gazetteer import get_gazetteer

    gazetteer = get_gazetteer()
    pairs: dict[tuple[str, str], int] = {}  # one lookup per place, not one string per sample
    for rows in _chunks(np.isfinite(lat) & np.isfinite(lon)):
        found = gazetteer.reverse_batch(lat[rows], lon[rows])
        for i, city, cc in zip(rows.tolist(), found["city"], found["country_code"], strict=True):
            if city:
                code = pairs.get((city, cc))
                if code is None:
                    code = pairs[(city, cc)] = table.setdefault(f"{city}, {cc}", len(table))
                codes[i] = code


def city_counts(scored: RunScore) -> dict[str, dict[str, int]]:
    """Per truth country, how many answers named each city (samples without either are skipped)."""
    country = scored.columns.country
    countries = country.column.array()
    cities, names = predicted_cities(scored)
    both = (countries != 0) & (cities >= 0)
    keys = countries[both].astype(np.int64) * max(len(names), 1) + cities[both]
    pairs, counts = np.unique(keys, return_counts=True)
    out: dict[str, dict[str, int]] = {}
    for key, count in zip(pairs.tolist(), counts.tolist(), strict=True):
        cc, city = divmod(key, max(len(names), 1))
        out.setdefault(country.table[cc], {})[names[city]] = count
    return out


def _pct(hits: int, n: int) -> float | None:
    return round(100.0 * (hits / n), 4) if n else None


def fairness_block(
    scored: RunScore,
    arrays: RowArrays,
    groupings: dict[str, Grouping],
    seed: int = 0,
    notes: list[str] | None = None,
) -> dict[str, Any]:
    """``summary["fairness"]``: metric, per-grouping disparity, accuracy per country, over-prediction."""
    block: dict[str, Any] = {"groupings": {}, "notes": list(notes or [])}
    headline = headline_metric(arrays, scored.protocol)
    if headline is None:
        block["notes"].append("no accuracy to compare across groups (no scored sample)")
        return block
    name, hit, has = headline.name, headline.hit, headline.has
    block["metric"] = name
    block["min_group_n"] = MIN_GROUP_N
    overall = _pct(int(hit[has].sum()), int(has.sum()))
    for grouping, groups in groupings.items():
        scored_groups = {group: hit[rows] for group, rows in groups.members(has) if rows.size}
        result = disparity(scored_groups, name, overall, seed=seed)
        assigned = int((groups.codes >= 0).sum())
        block["groupings"][grouping] = {
            "description": DESCRIPTIONS[grouping],
            "n_assigned": assigned,
            "n_unassigned": int(groups.codes.size - assigned),
            "disparity": result.as_dict() if result else None,
        }
        if result is None:
            block["notes"].append(
                f"{grouping}: fewer than two groups of {MIN_GROUP_N} samples or more, so no disparity"
            )
    block["by_country"] = _by_country(scored, hit, has)
    entropy = entropy_ranking(city_counts(scored))
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


def _by_country(scored: RunScore, hit: NDArray[np.bool_], has: NDArray[np.bool_]) -> dict[str, Any]:
    """The headline accuracy per truth country (the choropleth), by country code."""
    country = scored.columns.country
    countries = country.column.array()
    counted = has & (countries != 0)
    n = np.bincount(countries[counted], minlength=len(country.table))
    k = np.bincount(countries[counted & hit], minlength=len(country.table))
    found = {country.table[c]: (int(k[c]), int(n[c])) for c in np.flatnonzero(n).tolist()}
    return {cc: {"n": total, "value": _pct(hits, total)} for cc, (hits, total) in sorted(found.items())}


def add_fairness(summary: dict[str, Any], scored: RunScore, seed: int = 0) -> None:
    """Add the grouping breakdowns and the ``fairness`` block to a (percent) summary."""
    groupings, notes = group_codes(scored)
    arrays = RowArrays.of(scored)
    summary.setdefault("breakdowns", {}).update(fairness_breakdowns(arrays, groupings, scored.protocol, seed))
    summary["fairness"] = fairness_block(scored, arrays, groupings, seed, notes)


__all__ = ["GROUPINGS", "add_fairness", "fairness_block", "fairness_breakdowns", "group_codes"]
