"""Score prediction files under a named protocol: rows -> arrays -> metrics, CIs and warnings.

Every row that cannot be parsed, joined or read counts as wrong; nothing leaves a denominator.
Reverse geocoding and geocoding are injected (the gazetteer by default) so tests can use fakes.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core import metrics as M
from geosleuth.core.geo import distance_km
from geosleuth.core.parsing import Geocoder
from geosleuth.core.records import ParseStatus, Prediction
from geosleuth.scoring.checks import language_warning, misalignment_warning
from geosleuth.scoring.io import (
    ScoreInputError,
    Truth,
    field_value,
    iter_problems,
    prediction_from_row,
    read_rows,
    row_id,
    truth_from_row,
    truth_index,
)
from geosleuth.scoring.protocols import ScoringProtocol

AliasFn = Callable[[str, str, str], bool]
"""``(predicted, truth, level) -> same place?`` for names in different languages."""

ReverseFn = Callable[[NDArray[np.float64], NDArray[np.float64]], Mapping[str, ArrayLike]]
"""``(lats, lons) -> {key: array}``: the gazetteer's ``reverse_batch`` / ``reverse_geocoder_batch``."""

MISSING_GROUP = "(none)"
N_BOOT = 1000


@dataclass
class ScoredRow:
    """One sample as scored: where it came from, what was predicted, what was true."""

    file: str
    line: int
    id: str | None
    prediction: Prediction
    truth: Truth | None
    data: dict[str, Any] | None = None
    problem: str | None = None


@dataclass
class Score:
    """Numbers for one file (or one group). Accuracies in percent, distances in km."""

    n: int
    parsed: int
    metrics: dict[str, float]
    ci95: dict[str, tuple[float, float]]
    warnings: list[str] = field(default_factory=list)
    groups: dict[str, Score] = field(default_factory=dict)

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
        return out


def _round(name: str, value: float) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, 3 if name.endswith("_km") else 2)


@dataclass
class FileScore:
    """A scored file: the summary plus per-row records (for ``--rows``)."""

    path: str
    protocol: str
    score: Score
    rows: list[dict[str, Any]]


@dataclass
class ScoreArrays:
    """Per-row arrays every summary is computed from."""

    distances: NDArray[np.float64]
    parsed: NDArray[np.bool_]
    hits: dict[str, NDArray[np.bool_]]
    scored: dict[str, NDArray[np.bool_]]  # rows a level metric is defined on (truth label present)
    points: dict[str, NDArray[np.float64]]
    pred_levels: dict[str, NDArray[np.object_]]
    distance_metrics: bool = True  # False when no row has true coordinates (e.g. multiple choice)


def load_scored_rows(
    path: Path,
    protocol: ScoringProtocol,
    truth: tuple[Path, dict[str, Truth]] | None = None,
    geocoder: Geocoder | None = None,
) -> tuple[list[ScoredRow], list[str]]:
    """Read a prediction file and attach ground truth; returns rows and row problems."""
    name = str(path)
    rows: list[ScoredRow] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for raw in read_rows(path):
        if raw.data is None:
            rows.append(
                ScoredRow(
                    name, raw.line, None, Prediction(status=ParseStatus.FAILED), None, problem=raw.error
                )
            )
            continue
        sid = row_id(raw.data)
        prediction, pred_problem, from_columns = prediction_from_row(raw.data, protocol, geocoder)
        if truth is not None:
            row_truth = truth[1].get(sid) if sid is not None else None
            truth_problem = (
                f"no ground truth for id {sid!r} in {truth[0]}"
                if sid is not None
                else "row has no id to join on"
            )
            truth_problem = row_truth.problem if row_truth is not None else truth_problem
        else:
            has_text = any(isinstance(raw.data.get(k), str) for k in ("solution_str", "response", "output"))
            row_truth = truth_from_row(raw.data, plain_coords=from_columns or has_text)
            truth_problem = row_truth.problem if row_truth is not None else "row has no ground truth"
        problem = "; ".join(p for p in (pred_problem, truth_problem) if p)
        if sid is not None:
            if sid in seen:
                problems.append(f"{name}:{raw.line}: duplicate id {sid!r} (also on line {seen[sid]})")
            seen.setdefault(sid, raw.line)
        rows.append(ScoredRow(name, raw.line, sid, prediction, row_truth, raw.data, problem or None))
    if truth is not None:
        missing = [sid for sid in truth[1] if sid not in seen]
        for sid in missing:
            rows.append(
                ScoredRow(
                    name, 0, sid, Prediction(status=ParseStatus.EMPTY), truth[1][sid], None, "no prediction"
                )
            )
        if missing:
            problems.append(
                f"{len(missing)} sample(s) of {truth[0]} have no prediction in {name} and count as wrong "
                f"(first: {', '.join(map(repr, missing[:5]))})"
            )
    if rows and not any(
        r.truth is not None and (r.truth.has_coords or r.truth.labels or r.truth.answer) for r in rows
    ):
        raise ScoreInputError(
            f"{name}: no row carries ground truth (expected a ground_truth object or true_lat/true_lon "
            f"columns); pass the dataset with --truth FILE"
        )
    prefixes = (name,) if truth is None else (name, str(truth[0]))
    for r in rows:
        if r.problem and r.line:
            problems.append(r.problem if r.problem.startswith(prefixes) else f"{name}:{r.line}: {r.problem}")
    return rows, problems


def _coords(rows: Sequence[ScoredRow]) -> tuple[NDArray[np.float64], ...]:
    n = len(rows)
    plat, plon, tlat, tlon = (np.full(n, np.nan) for _ in range(4))
    for i, r in enumerate(rows):
        if r.prediction.has_coords:
            plat[i], plon[i] = r.prediction.lat, r.prediction.lon
        if r.truth is not None and r.truth.has_coords:
            tlat[i], tlon[i] = r.truth.lat, r.truth.lon
    return plat, plon, tlat, tlon


def _reverse_levels(
    reverse: ReverseFn, lats: NDArray[np.float64], lons: NDArray[np.float64], keys: Sequence[str]
) -> dict[str, NDArray[np.object_]]:
    """Reverse-geocode the finite points only; other rows get empty labels."""
    out = {k: np.full(lats.shape, "", dtype=object) for k in keys}
    ok = np.isfinite(lats) & np.isfinite(lons)
    if ok.any():
        found = reverse(lats[ok], lons[ok])
        for k in keys:
            values = np.array(found[k], dtype=object).reshape(-1)
            values[values == None] = ""  # noqa: E711 - elementwise None test
            out[k][ok] = values
    return out


def _truth_label_levels(
    rows: Sequence[ScoredRow], keys: Sequence[str]
) -> dict[str, NDArray[np.object_]] | None:
    """Dataset labels per reverse key when the rows carry them (OSV-5M compares against these)."""
    label_of = {"country_code": "country", "admin1": "admin1", "admin2": "admin2", "city": "city"}
    out: dict[str, NDArray[np.object_]] = {}
    for key in keys:
        level = label_of.get(key, key)
        values = [r.truth.labels.get(level) if r.truth is not None else None for r in rows]
        if all(v is None for v in values):
            return None
        out[key] = np.array(["" if v is None else v for v in values], dtype=object)
    return out


def compute_arrays(
    rows: Sequence[ScoredRow],
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
    aliases: AliasFn | None = None,
) -> tuple[ScoreArrays, list[str]]:
    """Distances, per-sample points and per-level hits for every row."""
    plat, plon, tlat, tlon = _coords(rows)
    parsed = np.array(
        [r.prediction.status in (ParseStatus.OK, ParseStatus.PARTIAL) for r in rows], dtype=bool
    )
    keys = [k for _, k in protocol.coord_levels]
    truth_levels = _truth_label_levels(rows, keys) if keys and protocol.truth_levels_from_labels else None
    has_labels = np.array([bool(r.truth and r.truth.labels) for r in rows], dtype=bool)
    arrays = arrays_from_coordinates(
        plat,
        plon,
        tlat,
        tlon,
        protocol,
        reverse,
        parsed=parsed,
        truth_levels=truth_levels,
        has_labels=has_labels,
    )
    notes: list[str] = []
    if rows and not np.isfinite(tlat).any():
        arrays.distance_metrics = False
        coord_metrics = {m for m, _ in protocol.coord_levels} if truth_levels is None else set()
        arrays.hits = {
            k: v for k, v in arrays.hits.items() if not k.startswith("acc@") and k not in coord_metrics
        }
        arrays.points = {}
    answers = [r.truth.answer if r.truth is not None else None for r in rows]
    if any(answers):
        has_answer = np.array([bool(a) for a in answers], dtype=bool)
        predicted = [r.prediction.choice for r in rows]
        arrays.hits["acc_choice"] = M.choice_hits(predicted, answers)
        arrays.scored["acc_choice"] = has_answer
        if not has_answer.all():
            notes.append(f"acc_choice is computed on the {int(has_answer.sum())} multiple-choice rows")
    if protocol.text_levels and rows:
        text_hits, text_scored, text_notes = _text_level_hits(rows, protocol.text_levels, aliases)
        arrays.hits.update(text_hits)
        arrays.scored.update(text_scored)
        notes.extend(text_notes)
    return arrays, notes


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
) -> ScoreArrays:
    """The vectorised core: predicted vs true coordinates (NaN = failed) -> per-row hits and points."""
    plat, plon, tlat, tlon = (np.asarray(a, dtype=np.float64).reshape(-1) for a in (plat, plon, tlat, tlon))
    d = np.asarray(
        distance_km(plat, plon, tlat, tlon, method=protocol.distance, radius_km=protocol.radius_km),
        dtype=np.float64,
    ).reshape(-1)
    valid = np.isfinite(plat) & np.isfinite(plon)
    parsed = valid if parsed is None else parsed
    hits: dict[str, NDArray[np.bool_]] = {}
    points: dict[str, NDArray[np.float64]] = {}
    pred_levels: dict[str, NDArray[np.object_]] = {}
    for t in protocol.thresholds:
        hits[M.threshold_name(t)] = M.hits_at(d, t, protocol.strict_threshold)
    if protocol.geoguessr:
        points["geoguessr"] = M.geoguessr_points(d)
    if protocol.geoscore:
        points["geoscore"] = M.geoscore_points(d)
    if protocol.coord_levels and d.size:
        keys = [k for _, k in protocol.coord_levels]
        reverse = reverse or default_reverse(protocol)
        if truth_levels is None:  # one reverse-geocoding pass over predictions and truth together
            both = _reverse_levels(reverse, np.concatenate([plat, tlat]), np.concatenate([plon, tlon]), keys)
            pred_levels = {k: v[: plat.size] for k, v in both.items()}
            true_levels = {k: v[plat.size :] for k, v in both.items()}
        else:
            pred_levels = _reverse_levels(reverse, plat, plon, keys)
            true_levels = dict(truth_levels)
        has_truth = np.isfinite(tlat) & np.isfinite(tlon)
        if has_labels is not None and truth_levels is not None:
            has_truth |= has_labels
        if protocol.nested_levels:
            level_hits = M.level_hits_from_coordinates(pred_levels, true_levels, keys)
        else:
            level_hits = {k: M.label_hits(pred_levels[k], true_levels[k]) for k in keys}
        for metric, key in protocol.coord_levels:
            hits[metric] = level_hits[key] & valid & has_truth
    return ScoreArrays(d, parsed, hits, {}, points, pred_levels)


def score_coordinates(
    plat: ArrayLike,
    plon: ArrayLike,
    tlat: ArrayLike,
    tlon: ArrayLike,
    protocol: ScoringProtocol,
    reverse: ReverseFn | None = None,
) -> Score:
    """Score coordinate arrays directly (no files): the path evaluation and benchmarks use."""
    return summarize(arrays_from_coordinates(plat, plon, tlat, tlon, protocol, reverse), protocol)


def _text_level_hits(
    rows: Sequence[ScoredRow], text_levels: Sequence[tuple[str, str]], aliases: AliasFn | None
) -> tuple[dict[str, NDArray[np.bool_]], dict[str, NDArray[np.bool_]], list[str]]:
    levels = [lv for _, lv in text_levels]
    truth = {lv: [r.truth.labels.get(lv) if r.truth else None for r in rows] for lv in levels}
    truth = {lv: vals for lv, vals in truth.items() if any(vals)}
    pred = {lv: [getattr(r.prediction, lv, None) for r in rows] for lv in levels}
    level_hits = M.level_hits_from_text(
        pred, truth, levels=[lv for lv in levels if lv in truth], aliases=aliases
    )
    out: dict[str, NDArray[np.bool_]] = {}
    scored: dict[str, NDArray[np.bool_]] = {}
    notes: list[str] = []
    for metric, lv in text_levels:
        if lv not in truth:
            continue
        has_label = np.array([bool(v) for v in truth[lv]], dtype=bool)
        out[metric] = level_hits[lv]
        scored[metric] = has_label
        if not has_label.all():
            notes.append(
                f"{metric} is computed on the {int(has_label.sum())} of {len(rows)} rows with a {lv} label"
            )
        warning = language_warning(pred[lv], truth[lv], lv)
        if warning:
            notes.append(warning)
    return out, scored, notes


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
        metrics[name] = 100.0 * M.accuracy(h_sel)
        lo, hi = M.bootstrap_ci(h_sel, n_boot=N_BOOT, seed=0)
        ci95[name] = (100.0 * lo, 100.0 * hi)
    if protocol.median_mean and arrays.distance_metrics:
        metrics["median_km"] = M.median_km(d)
        metrics["mean_km"] = M.mean_km(d)
    for name, p in arrays.points.items():
        values = p[sel]
        metrics[name] = float(values.mean()) if values.size else math.nan
    return Score(n=n, parsed=int(arrays.parsed[sel].sum()), metrics=_ordered(metrics), ci95=ci95)


def _ordered(metrics: dict[str, float]) -> dict[str, float]:
    """Distance thresholds ascending first, then the rest in insertion order."""
    dist = sorted((k for k in metrics if k.startswith("acc@")), key=lambda k: float(k[4:-2]))
    return {**{k: metrics[k] for k in dist}, **{k: v for k, v in metrics.items() if not k.startswith("acc@")}}


def default_reverse(protocol: ScoringProtocol) -> ReverseFn:
    """The offline gazetteer's reverse geocoder with the semantics the protocol names."""
    from geosleuth.gazetteer import get_gazetteer

    gazetteer = get_gazetteer()
    if protocol.reverse == "reverse_geocoder":
        return gazetteer.reverse_geocoder_batch  # type: ignore[no-any-return]
    return gazetteer.reverse_batch  # type: ignore[no-any-return]


def gazetteer_aliases(gazetteer: Any) -> AliasFn:
    """Two names are the same place when the gazetteer's best match for each is the same place.

    Catches exonyms and other languages ("München" / "Munich", "Wien" / "Vienna").
    """

    @lru_cache(maxsize=200_000)
    def best(name: str) -> str | None:
        try:
            places = gazetteer.search(name, limit=1)
        except Exception:  # noqa: BLE001 - an unsearchable name simply has no alias
            return None
        return str(places[0].id) if places else None

    def same(predicted: str, truth: str, level: str) -> bool:
        a = best(predicted)
        return a is not None and a == best(truth)

    return same


def default_geocoder() -> Geocoder:
    """The offline gazetteer as a forward geocoder."""
    from geosleuth.gazetteer import get_gazetteer

    return get_gazetteer()  # type: ignore[no-any-return]


def score_file(
    path: Path,
    protocol: ScoringProtocol,
    truth_path: Path | None = None,
    by: str | None = None,
    geocoder: Geocoder | None = None,
    reverse: ReverseFn | None = None,
    aliases: AliasFn | None = None,
) -> FileScore:
    """Score one prediction file; raises :class:`ScoreInputError` only for fatal input problems."""
    if protocol.file_scorer:  # a benchmark with its own rules (WhereBench); it imports this module
        module, _, function = protocol.file_scorer.partition(":")
        scorer: Callable[..., FileScore] = getattr(importlib.import_module(module), function)
        return scorer(path, protocol, truth_path)
    truth = None
    problems: list[str] = []
    if truth_path is not None:
        index, truth_problems = truth_index(truth_path)
        truth = (truth_path, index)
        problems.extend(truth_problems)
    if protocol.geocode and geocoder is None:
        geocoder = default_geocoder()
    if protocol.text_levels and aliases is None and hasattr(geocoder, "search"):
        aliases = gazetteer_aliases(geocoder)
    rows, row_problems = load_scored_rows(path, protocol, truth, geocoder)
    problems.extend(row_problems)
    arrays, notes = compute_arrays(rows, protocol, reverse, aliases)
    score = summarize(arrays, protocol)
    score.warnings = _warnings(path, rows, arrays, problems, notes)
    if by:
        score.groups = _groups(rows, arrays, protocol, by)
        if set(score.groups) == {MISSING_GROUP}:
            score.warnings.append(f"--by {by}: no row has this field")
    return FileScore(str(path), protocol.name, score, _row_records(rows, arrays))


def _warnings(
    path: Path, rows: Sequence[ScoredRow], arrays: ScoreArrays, problems: list[str], notes: list[str]
) -> list[str]:
    out: list[str] = []
    if not rows:
        out.append(f"{path}: file is empty; nothing to score")
        return out
    unparsed = int((~arrays.parsed).sum())
    if unparsed:
        lines = [str(r.line) for r, ok in zip(rows, arrays.parsed, strict=True) if not ok and r.line]
        shown = ", ".join(lines[:10]) + (", …" if len(lines) > 10 else "")
        where = f" (lines {shown})" if lines else ""
        out.append(f"{unparsed} of {len(rows)} predictions could not be parsed and count as wrong{where}")
    no_coords = int(np.sum(arrays.parsed & ~np.isfinite(arrays.distances)))
    if no_coords and arrays.distance_metrics:
        out.append(
            f"{no_coords} parsed predictions or their ground truth lack usable coordinates (count as wrong)"
        )
    out.extend(iter_problems(problems))
    plat, plon, tlat, tlon = _coords(rows)
    warning = misalignment_warning(plat, plon, tlat, tlon)
    if warning:
        out.append(warning)
    out.extend(notes)
    return out


def _groups(
    rows: Sequence[ScoredRow], arrays: ScoreArrays, protocol: ScoringProtocol, by: str
) -> dict[str, Score]:
    members: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        members.setdefault(field_value(r.data, r.truth, by) or MISSING_GROUP, []).append(i)
    return {
        key: summarize(arrays, protocol, np.array(members[key], dtype=np.intp)) for key in sorted(members)
    }


def _row_records(rows: Sequence[ScoredRow], arrays: ScoreArrays) -> list[dict[str, Any]]:
    """Per-row results for ``--rows``: inputs, distance, points and hits."""
    plat, plon, tlat, tlon = _coords(rows)
    records: list[dict[str, Any]] = []
    for i, r in enumerate(rows):
        rec: dict[str, Any] = {
            "id": r.id,
            "line": r.line,
            "status": r.prediction.status.value,
            "format": r.prediction.format,
            "pred_lat": _num(plat[i]),
            "pred_lon": _num(plon[i]),
            "true_lat": _num(tlat[i]),
            "true_lon": _num(tlon[i]),
            "distance_km": _num(arrays.distances[i]),
        }
        for name, p in arrays.points.items():
            rec[name] = float(p[i])
        for key, values in arrays.pred_levels.items():
            rec[f"pred_{key}"] = values[i]
        for name, h in arrays.hits.items():
            rec[name] = bool(h[i]) if name not in arrays.scored or arrays.scored[name][i] else None
        rec["recovered"] = ",".join(r.prediction.recovered)
        rec["problem"] = r.problem
        records.append(rec)
    return records


def _num(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
