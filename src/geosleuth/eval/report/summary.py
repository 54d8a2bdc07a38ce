"""Aggregate score rows into the numbers of ``summary.json``.

All metric math comes from ``geosleuth.core.metrics``; this module only selects rows, groups
them and attaches bootstrap intervals. Accuracies (and WhereBench scores) are stored as
percentages 0–100 (``units.accuracy == "percent"``); rates and probabilities (tool success and
cache-hit rates, calibration confidence and hit rate) stay fractions in [0, 1].
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from geosleuth.core import metrics
from geosleuth.core.records import Trajectory, TrajectoryStatus
from geosleuth.eval.report.scores import RecordStats, ScoreRow
from geosleuth.eval.run.config import Price
from geosleuth.eval.wherebench import rules as wherebench
from geosleuth.scoring.protocols import ScoringProtocol

DEFAULT_BREAKDOWNS: tuple[str, ...] = ("continent", "data_source", "data_type", "difficulty", "answer_type")
UNITS: dict[str, str] = {"accuracy": "percent", "rates": "fraction", "distance": "km"}
CALIBRATION_BINS = 5
MAX_AUTO_GROUPS = 20  # an extra dataset column with more distinct values is not a breakdown


def _num(value: float) -> float | None:
    """JSON-safe number: NaN and infinities become ``null``."""
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def _with_ci(hits: np.ndarray, seed: int) -> dict[str, Any]:
    lo, hi = metrics.bootstrap_ci(hits, seed=seed)
    return {"value": _num(metrics.accuracy(hits)), "ci95": [_num(lo), _num(hi)], "n": int(hits.size)}


def distance_metrics(rows: Sequence[ScoreRow], protocol: ScoringProtocol, seed: int = 0) -> dict[str, Any]:
    """Acc@k with 95 % CIs, median / mean error and GeoGuessr score over coordinate samples."""
    scored = [r for r in rows if r.true_lat is not None and r.answer_type != "choice"]
    if not scored:
        return {}
    d = np.array([r.distance_km for r in scored])
    out: dict[str, Any] = {}
    for km in metrics.resolve_thresholds(protocol.thresholds):
        out[metrics.threshold_name(km)] = _with_ci(metrics.hits_at(d, km, protocol.strict_threshold), seed)
    points = metrics.geoguessr_points(d)
    lo, hi = metrics.bootstrap_ci_mean(points, seed=seed)
    out["geoguessr"] = {
        "value": _num(metrics.geoguessr_score(d)),
        "ci95": [_num(lo), _num(hi)],
        "n": len(scored),
    }
    out["median_km"] = _num(metrics.median_km(d))
    out["mean_km"] = _num(metrics.mean_km(d))
    out["answered"] = int(np.isfinite(d).sum())
    return out


def level_metrics(rows: Sequence[ScoreRow], seed: int = 0) -> dict[str, Any]:
    """Accuracy per hierarchy level over the samples whose ground truth has that level."""
    out: dict[str, Any] = {}
    for level in metrics.PATH_LEVELS:
        hits = np.array([r.level_hits[level] for r in rows if level in r.level_hits], dtype=bool)
        if hits.size:
            out[f"{level}_acc"] = _with_ci(hits, seed)
    choices = np.array([bool(r.choice_correct) for r in rows if r.choice_correct is not None], dtype=bool)
    if choices.size:
        out["choice_acc"] = _with_ci(choices, seed)
    return out


def coordinate_level_metrics(
    rows: Sequence[ScoreRow], protocol: ScoringProtocol, seed: int = 0
) -> dict[str, Any]:
    """The protocol's levels from reverse-geocoded coordinates (e.g. OSV-5M country / region / city).

    Uses the scoring engine; when no reverse geocoder is available the reason is reported
    instead of numbers.
    """
    scored = [r for r in rows if r.true_lat is not None and r.answer_type != "choice"]
    if not protocol.coord_levels or not scored:
        return {}
    from dataclasses import replace

    from geosleuth.scoring.vectorised import arrays_from_coordinates, default_reverse

    try:
        reverse = default_reverse(protocol)
    except (ImportError, AttributeError, OSError, RuntimeError) as exc:
        return {"unavailable": f"no reverse geocoder for coordinate levels ({type(exc).__name__}: {exc})"}
    label_of = {"country_code": "country", "admin1": "admin1", "admin2": "admin2", "city": "city"}
    truth_levels = None
    if protocol.truth_levels_from_labels and all(r.labels for r in scored):
        truth_levels = {
            key: np.array([r.labels.get(label_of.get(key, key), "") for r in scored], dtype=object)
            for _, key in protocol.coord_levels
        }
    no_thresholds = replace(protocol, thresholds=(), geoguessr=False, geoscore=False)
    arrays = arrays_from_coordinates(
        [np.nan if r.pred_lat is None else r.pred_lat for r in scored],
        [np.nan if r.pred_lon is None else r.pred_lon for r in scored],
        [r.true_lat for r in scored],
        [r.true_lon for r in scored],
        no_thresholds,
        reverse,
        truth_levels=truth_levels,
        has_labels=np.array([bool(r.labels) for r in scored]) if truth_levels is not None else None,
    )
    return {name: _with_ci(arrays.hits[name], seed) for name, _ in protocol.coord_levels}


def multi_sample_metrics(rows: Sequence[ScoreRow], protocol: ScoringProtocol) -> dict[str, Any]:
    """pass@K, oracle Best@N and the aggregated (verifier@N) accuracy when N > 1."""
    multi = [r for r in rows if r.true_lat is not None and r.answer_type != "choice"]
    n = max((len(r.sample_distances) for r in multi), default=0)
    if n <= 1:
        return {}
    matrix = np.full((len(multi), n), np.nan)
    for i, row in enumerate(multi):
        matrix[i, : len(row.sample_distances)] = row.sample_distances
    best = metrics.best_of_n(matrix)
    aggregated = np.array([r.distance_km for r in multi])
    aggregators = sorted({r.aggregator for r in multi if r.aggregator})
    out: dict[str, Any] = {"n": n, "aggregators": aggregators, "pass@k": {}, "best@n": {}, "aggregated": {}}
    ks = sorted({k for k in (1, 2, 4, 8, 16, 32, n) if k <= n})
    for km in metrics.resolve_thresholds(protocol.thresholds):
        name = metrics.threshold_name(km)
        hits = np.column_stack(
            [metrics.hits_at(matrix[:, j], km, protocol.strict_threshold) for j in range(n)]
        )
        out["pass@k"][name] = {str(k): _num(metrics.pass_at_k(hits, k)) for k in ks}
        out["best@n"][name] = _num(float(metrics.hits_at(best, km, protocol.strict_threshold).mean()))
        out["aggregated"][name] = _num(
            float(metrics.hits_at(aggregated, km, protocol.strict_threshold).mean())
        )
    out["best@n"]["median_km"] = _num(metrics.median_km(best))
    return out


def _percentile(values: list[float], q: float) -> float | None:
    return _num(float(np.percentile(values, q))) if values else None


def tool_metrics(
    trajectories: Mapping[str, Trajectory] | Mapping[str, RecordStats], prices: Mapping[str, Price]
) -> dict[str, Any]:
    """Calls per tool, success and cache-hit rates, turns, tokens, latency and cost."""
    per_tool: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    turns, prompt, completion, latency = [], [], [], []
    cost = 0.0
    priced = True
    for trajectory in trajectories.values():
        record = RecordStats.of(trajectory)
        turns.append(record.turns)
        prompt.append(sum(u[1] for u in record.usage))
        completion.append(sum(u[2] for u in record.usage))
        if record.latency_s is not None:
            latency.append(record.latency_s)
        for model, usage_p, usage_c in record.usage:
            price = prices.get(model)
            if price is None:
                priced = priced and not (usage_p or usage_c)
            else:
                cost += (usage_p * price.prompt + usage_c * price.completion) / 1e6
        for call in record.calls:
            stats = per_tool[call.name]
            stats["calls"] += 1
            stats["ok"] += call.ok
            stats["cache_hits"] += call.cache_hit
            stats["latency_s"] += call.latency_s
    total_calls = sum(s["calls"] for s in per_tool.values())
    n = max(len(trajectories), 1)
    tools = {
        name: {
            "calls": int(s["calls"]),
            "calls_per_sample": _num(s["calls"] / n),
            "success_rate": _num(s["ok"] / s["calls"]),
            "cache_hit_rate": _num(s["cache_hits"] / s["calls"]),
            "mean_latency_s": _num(s["latency_s"] / s["calls"]),
        }
        for name, s in sorted(per_tool.items())
    }
    return {
        "per_tool": tools,
        "tool_calls": int(total_calls),
        "tool_calls_per_sample": _num(total_calls / n) if trajectories else None,
        "tool_success_rate": _num(sum(s["ok"] for s in per_tool.values()) / total_calls)
        if total_calls
        else None,
        "tool_error_rate": _num(1 - sum(s["ok"] for s in per_tool.values()) / total_calls)
        if total_calls
        else None,
        "cache_hit_rate": _num(sum(s["cache_hits"] for s in per_tool.values()) / total_calls)
        if total_calls
        else None,
        "turns_per_sample": _num(float(np.mean(turns))) if turns else None,
        "prompt_tokens_per_sample": _num(float(np.mean(prompt))) if prompt else None,
        "completion_tokens_per_sample": _num(float(np.mean(completion))) if completion else None,
        "total_tokens": int(sum(prompt) + sum(completion)),
        "latency_s": {
            "mean": _num(float(np.mean(latency))) if latency else None,
            "p50": _percentile(latency, 50),
            "p95": _percentile(latency, 95),
        },
        "cost_usd": _num(cost) if priced and prices else None,
    }


def calibration(rows: Sequence[ScoreRow], protocol: ScoringProtocol) -> dict[str, Any]:
    """Reported confidence against error: binned hit rate at the median threshold, and rank correlation."""
    rated = [r for r in rows if r.confidence is not None and r.true_lat is not None]
    if len(rated) < 2:
        return {"n": len(rated)}
    from scipy.stats import spearmanr

    thresholds = metrics.resolve_thresholds(protocol.thresholds)
    km = thresholds[len(thresholds) // 2]
    conf = np.clip(np.array([float(r.confidence) for r in rated]), 0.0, 1.0)
    d = np.array([r.distance_km for r in rated])
    hits = metrics.hits_at(d, km, protocol.strict_threshold)
    edges = np.linspace(0.0, 1.0, CALIBRATION_BINS + 1)
    index = metrics.calibration_bin_index(conf, CALIBRATION_BINS)
    bins = []
    for b in range(CALIBRATION_BINS):
        mask = index == b
        if not mask.any():
            continue
        bins.append(
            {
                "range": [_num(edges[b]), _num(edges[b + 1])],
                "n": int(mask.sum()),
                "mean_confidence": _num(float(conf[mask].mean())),
                "hit_rate": _num(float(hits[mask].mean())),
                "median_km": _num(metrics.median_km(d[mask])),
            }
        )
    charged = metrics.charged_distances(d)
    rho = spearmanr(conf, charged).statistic if np.ptp(conf) > 0 and np.ptp(charged) > 0 else math.nan
    return {
        "n": len(rated),
        "threshold": metrics.threshold_name(km),
        "ece": _num(metrics.expected_calibration_error(conf, hits, CALIBRATION_BINS)),
        "spearman_confidence_vs_error": _num(float(rho)),
        "bins": bins,
    }


def breakdowns(rows: Sequence[ScoreRow], protocol: ScoringProtocol, fields: Sequence[str]) -> dict[str, Any]:
    """The headline metrics per value of each field (groups smaller than the whole only)."""
    out: dict[str, Any] = {}
    for name in fields:
        groups: dict[str, list[ScoreRow]] = defaultdict(list)
        for row in rows:
            value = row.fields.get(name)
            if value is not None:
                groups[str(value)].append(row)
        if not groups:
            continue
        out[name] = {
            value: {"n": len(group), **_headline(group, protocol)} for value, group in sorted(groups.items())
        }
    return out


def _headline(rows: Sequence[ScoreRow], protocol: ScoringProtocol) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, metric in {**distance_metrics(rows, protocol), **level_metrics(rows)}.items():
        values[key] = metric["value"] if isinstance(metric, dict) else metric
    return values


def status_counts(rows: Sequence[ScoreRow]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        counts[row.status] += 1
    return dict(sorted(counts.items()))


def wherebench_summary(
    rows: Sequence[ScoreRow], judgments: Mapping[tuple[str, str], Mapping[str, Any]] | None = None
) -> dict[str, Any] | None:
    """WhereCountry accuracy (as published and every row), WhereStreet per split, thinking, Overall.

    Thinking scores come from recorded ``clues`` judgments (a failed judgment counts as no
    clue used); items never judged are counted, not scored. A recorded ``path`` judgment
    adds the judged path score beside the rule-based one.
    """
    judgments = judgments or {}
    items: list[wherebench.WhereItem] = []
    judged_path: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        source = row.fields.get("data_source")
        if source == "wherecountry" and row.answer_type == "choice":
            items.append(
                wherebench.WhereItem(
                    row.sample_id,
                    "wherecountry",
                    parsed=bool(row.choice_parsed),
                    correct=bool(row.choice_correct),
                )
            )
            continue
        if source != "wherestreet":
            continue
        split = row.fields.get("split")
        split = split if split in wherebench.SOURCES else wherebench.source_of(row.sample_id)
        clues = judgments.get((row.sample_id, "clues"))
        used = None
        if clues is not None:
            recorded = (clues.get("result") or {}).get("used")
            used = [bool(u) for u in recorded] if isinstance(recorded, list) else None
        text = row.path_score is not None
        items.append(
            wherebench.WhereItem(
                row.sample_id,
                "text" if text else "coordinates",
                source=split,
                path_score=row.path_score or 0.0,
                distance_km=row.distance_km,
                clues_used=used,
                clue_weights=list(row.clue_weights),
            )
        )
        path = judgments.get((row.sample_id, "path"))
        if text and path is not None:
            judged_path[split].append(float((path.get("result") or {}).get("score") or 0.0))
    if not items:
        return None
    out = wherebench.wherebench_figures(items)
    for split, figures in (out.get("wherestreet") or {}).items():
        scores = judged_path.get(split)
        if scores:
            figures["path_score_judge"] = round(100.0 * float(np.mean(scores)), 4)
            figures["n_path_judged"] = len(scores)
    return out


_RATE_KEYS = ("rate", "confidence", "ece", "spearman")


def _is_accuracy(name: str) -> bool:
    return ("acc" in name or name.startswith(("pass@", "best@"))) and not any(k in name for k in _RATE_KEYS)


def _scaled(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    return round(100.0 * float(value), 4) if math.isfinite(value) else value


def _scale_metric(metric: Any) -> Any:
    if isinstance(metric, dict) and "value" in metric:
        return {
            **metric,
            "value": _scaled(metric["value"]),
            "ci95": [_scaled(v) for v in metric.get("ci95", [])],
        }
    return _scaled(metric)


def percent_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A summary with accuracies in percent; summaries written before the convention are converted.

    Idempotent: a summary marked ``units.accuracy == "percent"`` is returned as is.
    """
    if (summary.get("units") or {}).get("accuracy") == "percent":
        return summary
    out = dict(summary)
    out["metrics"] = {
        k: _scale_metric(v) if _is_accuracy(k) else v for k, v in summary.get("metrics", {}).items()
    }
    out["coordinate_levels"] = {
        k: _scale_metric(v) if isinstance(v, dict) else v
        for k, v in (summary.get("coordinate_levels") or {}).items()
    }
    multi = summary.get("multi_sample") or {}
    if multi:
        out["multi_sample"] = {
            **multi,
            "pass@k": {t: {k: _scaled(v) for k, v in by_k.items()} for t, by_k in multi["pass@k"].items()},
            "best@n": {k: v if k.endswith("_km") else _scaled(v) for k, v in multi["best@n"].items()},
            "aggregated": {k: _scaled(v) for k, v in multi["aggregated"].items()},
        }
    out["breakdowns"] = {
        field: {
            value: {k: _scaled(v) if _is_accuracy(k) else v for k, v in group.items()}
            for value, group in groups.items()
        }
        for field, groups in (summary.get("breakdowns") or {}).items()
    }
    if summary.get("judges"):
        out["judges"] = percent_judges(summary["judges"])
    out["units"] = dict(UNITS)
    return out


def percent_judges(judges: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Judge aggregates (fractions from ``judge_summary``) with accuracies and scores in percent."""
    return {
        judge: {k: _scaled(v) if _is_accuracy(k) or k == "mean_score" else v for k, v in values.items()}
        for judge, values in judges.items()
    }


def summarize(
    rows: Sequence[ScoreRow],
    trajectories: Mapping[str, Trajectory] | Mapping[str, RecordStats],
    protocol: ScoringProtocol,
    *,
    fields: Sequence[str] = (),
    prices: Mapping[str, Price] | None = None,
    seed: int = 0,
    judgments: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whole ``summary.json`` body except run provenance and judges (accuracies in percent)."""
    body = percent_summary(_summary_fractions(rows, trajectories, protocol, fields, prices, seed))
    where = wherebench_summary(rows, judgments)
    if where is not None:
        body["wherebench"] = where
    return body


def _summary_fractions(
    rows: Sequence[ScoreRow],
    trajectories: Mapping[str, Trajectory] | Mapping[str, RecordStats],
    protocol: ScoringProtocol,
    fields: Sequence[str],
    prices: Mapping[str, Price] | None,
    seed: int,
) -> dict[str, Any]:
    counts = status_counts(rows)
    finished = sum(v for k, v in counts.items() if k != "missing")
    return {
        "protocol": {
            "name": protocol.name,
            "distance": protocol.distance,
            "thresholds": list(protocol.thresholds),
            "strict": protocol.strict_threshold,
        },
        "n_samples": len(rows),
        "n_finished": finished,
        "complete": finished == len(rows),
        "n_failed": sum(v for k, v in counts.items() if k != TrajectoryStatus.OK.value),
        "status_counts": counts,
        "metrics": {**distance_metrics(rows, protocol, seed), **level_metrics(rows, seed)},
        "coordinate_levels": coordinate_level_metrics(rows, protocol, seed),
        "multi_sample": multi_sample_metrics(rows, protocol),
        "tools": tool_metrics(trajectories, prices or {}),
        "calibration": calibration(rows, protocol),
        "notes": unlabelled_level_notes(rows, protocol),
        "breakdowns": breakdowns(
            rows, protocol, [*dict.fromkeys([*DEFAULT_BREAKDOWNS, *fields, *dataset_columns(rows)])]
        ),
    }


def unlabelled_level_notes(rows: Sequence[ScoreRow], protocol: ScoringProtocol) -> list[str]:
    """Why a level the protocol scores has no figure: no sample carries that label (never a 0)."""
    labelled = {lv for r in rows for lv, v in r.labels.items() if v}
    return [
        f"{lv}_acc ({metric} of --protocol {protocol.name}): no sample has a {lv} label, so it is not "
        "reported (not available, never 0)"
        for metric, lv in protocol.text_levels
        if lv not in labelled and any(r.answer_type != "choice" for r in rows)
    ]


def dataset_columns(rows: Sequence[ScoreRow]) -> list[str]:
    """The dataset's extra columns that group samples: 2 to `MAX_AUTO_GROUPS` distinct values,
    fewer than the rows that have one (an id or file-name column groups nothing)."""
    values: dict[str, set[str]] = defaultdict(set)
    present: dict[str, int] = defaultdict(int)
    for row in rows:
        for key, value in row.fields.items():
            if key.startswith("metadata.") and value not in (None, ""):
                name = key.removeprefix("metadata.")
                present[name] += 1
                seen = values[name]
                if len(seen) <= MAX_AUTO_GROUPS:  # bounded: an id column stops growing here
                    seen.add(str(value))
    return [
        name
        for name, seen in values.items()
        if 2 <= len(seen) <= MAX_AUTO_GROUPS and len(seen) < present[name]
    ]
