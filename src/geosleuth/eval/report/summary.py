"""The numbers of ``summary.json``, from a run scored by the scoring engine (`eval.scores.RunScore`).

``metrics`` are the protocol's own figures exactly as ``geosleuth score`` computes them (the
same function over the same rows), by the same names; everything else is a clearly named extra
beside them: status counts, tool use, calibration, multi-sample figures, breakdowns (the engine's
figures over each group's rows) and WhereBench's own block. A breakdown reads the run's per-row
columns (``RunScore.columns``) and the engine's per-row arrays (``RunScore.file.arrays``).
Accuracies (and WhereBench scores) are percentages 0–100 (``units.accuracy == "percent"``);
rates and probabilities (tool success and cache-hit rates, calibration confidence and hit rate)
stay fractions in [0, 1].
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core import metrics
from geosleuth.core.records import TrajectoryStatus
from geosleuth.eval.report.scores import MISSING, RunColumns, RunScore, WhereRow
from geosleuth.eval.run.config import Price
from geosleuth.eval.wherebench import rules as wherebench
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.scoring.results import FileScore
from geosleuth.scoring.vectorised import summarize as engine_summarize

DEFAULT_BREAKDOWNS: tuple[str, ...] = ("continent", "data_source", "data_type", "difficulty", "answer_type")
UNITS: dict[str, str] = {"accuracy": "percent", "rates": "fraction", "distance": "km"}
CALIBRATION_BINS = 5


def _num(value: float) -> float | None:
    """JSON-safe number: NaN and infinities become ``null``."""
    return None if value is None or not math.isfinite(value) else round(float(value), 6)


def protocol_metrics(scored: FileScore) -> dict[str, Any]:
    """The protocol's figures as the engine computed them: an accuracy with its 95 % interval
    and the rows it is defined on, a distance or a points mean as a number."""
    score, arrays = scored.score, scored.arrays
    out: dict[str, Any] = {}
    for name, value in score.metrics.items():
        if name not in score.ci95:
            out[name] = _num(value)
            continue
        lo, hi = score.ci95[name]
        n = score.n
        if arrays is not None and name in arrays.scored:
            n = int(arrays.scored[name].sum())
        out[name] = {"value": _num(value), "ci95": [_num(lo), _num(hi)], "n": n}
    return out


def _coordinate_rows(run: RunScore) -> NDArray[np.bool_]:
    """Samples with true coordinates that are not multiple choice (distance figures are theirs)."""
    columns = run.columns
    choice = columns.answer_type.codes.get("choice", -1)
    return np.isfinite(columns.column("true_lat")) & (columns.answer_type.column.array() != choice)


def multi_sample_metrics(run: RunScore) -> dict[str, Any]:
    """pass@K, oracle Best@N and the aggregated (verifier@N) accuracy in percent, when N > 1."""
    columns, protocol = run.columns, run.protocol
    n = len(columns.sample_distances)
    if n <= 1:
        return {}
    rows = _coordinate_rows(run)
    matrix = np.column_stack([c.array() for c in columns.sample_distances])[rows]
    best = metrics.best_of_n(matrix)
    aggregated = run.distances[rows]
    out: dict[str, Any] = {
        "n": n,
        "aggregators": sorted(columns.aggregators),
        "pass@k": {},
        "best@n": {},
        "range@n": {},
        "aggregated": {},
    }
    ks = sorted({k for k in (1, 2, 4, 8, 16, 32, n) if k <= n})
    for km in metrics.resolve_thresholds(protocol.thresholds):
        name = metrics.threshold_name(km)
        hits = np.column_stack(
            [metrics.hits_at(matrix[:, j], km, protocol.strict_threshold) for j in range(n)]
        )
        out["pass@k"][name] = {str(k): _pct(metrics.pass_at_k(hits, k)) for k in ks}
        out["best@n"][name] = _pct(float(metrics.hits_at(best, km, protocol.strict_threshold).mean()))
        out["range@n"][name] = _pct(metrics.range_at_n(matrix, km, protocol.strict_threshold))
        out["aggregated"][name] = _pct(
            float(metrics.hits_at(aggregated, km, protocol.strict_threshold).mean())
        )
    out["best@n"]["median_km"] = _num(metrics.median_km(best))
    return out


def _pct(value: float) -> float | None:
    return _num(100.0 * value)


def _percentile(values: NDArray[np.float64], q: float) -> float | None:
    return _num(float(np.percentile(values, q))) if values.size else None


def _mean(values: NDArray[Any]) -> float | None:
    return _num(float(np.mean(values))) if values.size else None


def tool_metrics(columns: RunColumns, prices: Mapping[str, Price]) -> dict[str, Any]:
    """Calls per tool, success and cache-hit rates, turns, tokens, latency and cost, over the
    samples that have a trajectory record."""
    status = columns.status
    recorded = status.column.array() != status.codes.get(MISSING, -1)
    n_records = int(recorded.sum())
    per_tool = columns.tools.calls
    cost = 0.0
    priced = True
    for model, (prompt, completion) in columns.tools.usage.items():
        price = prices.get(model)
        if price is None:
            priced = priced and not (prompt or completion)
        else:
            cost += (prompt * price.prompt + completion * price.completion) / 1e6
    total_calls = sum(t[0] for t in per_tool.values())
    total_ok = sum(t[1] for t in per_tool.values())
    n = max(n_records, 1)
    tools = {
        name: {
            "calls": int(calls),
            "calls_per_sample": _num(calls / n),
            "success_rate": _num(ok / calls),
            "cache_hit_rate": _num(hits / calls),
            "mean_latency_s": _num(latency / calls),
        }
        for name, (calls, ok, hits, latency) in sorted(per_tool.items())
    }
    latency = columns.column("latency_s")[recorded]
    latency = latency[np.isfinite(latency)]
    prompt = columns.column("prompt_tokens")[recorded]
    completion = columns.column("completion_tokens")[recorded]
    return {
        "per_tool": tools,
        "tool_combinations": {
            k: _num(v) for k, v in metrics.combination_shares(columns.tools.combinations).items()
        },
        "tool_calls": int(total_calls),
        "tool_calls_per_sample": _num(total_calls / n) if n_records else None,
        "tool_success_rate": _num(total_ok / total_calls) if total_calls else None,
        "tool_error_rate": _num(1 - total_ok / total_calls) if total_calls else None,
        "cache_hit_rate": _num(sum(t[2] for t in per_tool.values()) / total_calls) if total_calls else None,
        "turns_per_sample": _mean(columns.column("turns")[recorded]),
        "prompt_tokens_per_sample": _mean(prompt),
        "completion_tokens_per_sample": _mean(completion),
        "total_tokens": int(prompt.sum() + completion.sum()),
        "latency_s": {
            "mean": _mean(latency),
            "p50": _percentile(latency, 50),
            "p95": _percentile(latency, 95),
        },
        "cost_usd": _num(cost) if priced and prices else None,
    }


def calibration(
    confidence: NDArray[np.float64], distances: NDArray[np.float64], protocol: ScoringProtocol
) -> dict[str, Any]:
    """Reported confidence against error (rows with a confidence and a true point): binned hit
    rate at the protocol's middle threshold, and rank correlation."""
    rated = np.isfinite(confidence)
    if rated.sum() < 2:
        return {"n": int(rated.sum())}
    from scipy.stats import spearmanr

    thresholds = metrics.resolve_thresholds(protocol.thresholds)
    km = thresholds[len(thresholds) // 2]
    conf = np.clip(confidence[rated], 0.0, 1.0)
    d = distances[rated]
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
        "n": int(rated.sum()),
        "threshold": metrics.threshold_name(km),
        "ece": _num(metrics.expected_calibration_error(conf, hits, CALIBRATION_BINS)),
        "spearman_confidence_vs_error": _num(float(rho)),
        "bins": bins,
    }


def run_calibration(run: RunScore) -> dict[str, Any]:
    """`calibration` over the run's samples that have true coordinates."""
    confidence = np.where(_coordinate_rows(run), run.columns.column("confidence"), math.nan)
    return calibration(confidence, run.distances, run.protocol)


def field_codes(run: RunScore, name: str) -> tuple[NDArray[np.int32], list[str]] | None:
    """(per-row code, values) of a breakdown field; code 0 is a sample without a value."""
    columns = run.columns
    if name == "continent":
        return columns.continents()
    if name == "country":
        return columns.country.column.array(), columns.country.table
    return columns.fields.codes(name)


def breakdowns(run: RunScore, fields: Sequence[str]) -> dict[str, Any]:
    """The protocol's figures (the engine's, over each group's rows) per value of each field."""
    arrays = run.file.arrays
    assert arrays is not None
    out: dict[str, Any] = {}
    for name in fields:
        found = field_codes(run, name)
        if found is None:
            continue
        codes, table = found
        groups = {table[c]: np.flatnonzero(codes == c) for c in np.unique(codes).tolist() if c}
        if not groups:
            continue
        out[name] = {
            value: {"n": int(rows.size), **engine_summarize(arrays, run.protocol, rows).metrics}
            for value, rows in sorted(groups.items())
        }
        for group in out[name].values():
            for key, value in group.items():
                group[key] = value if key == "n" else _num(value)
    return out


def status_counts(run: RunScore) -> dict[str, int]:
    status = run.columns.status
    counts = np.bincount(status.column.array(), minlength=len(status.table)).tolist()
    return {name: int(k) for name, k in sorted(zip(status.table, counts, strict=True)) if k}


def wherebench_summary(
    rows: Sequence[WhereRow],
    distances: NDArray[np.float64],
    judgments: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
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
        if row.source == "wherecountry" and row.answer_type == "choice":
            items.append(
                wherebench.WhereItem(
                    row.sample_id, "wherecountry", parsed=row.choice_parsed, correct=row.choice_correct
                )
            )
            continue
        if row.source != "wherestreet":
            continue
        split = row.split if row.split in wherebench.SOURCES else wherebench.source_of(row.sample_id)
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
                distance_km=float(distances[row.index]),
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
    run: RunScore,
    *,
    fields: Sequence[str] = (),
    prices: Mapping[str, Price] | None = None,
    judgments: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The whole ``summary.json`` body except run provenance and judges (accuracies in percent)."""
    protocol, score = run.protocol, run.file.score
    counts = status_counts(run)
    finished = sum(v for k, v in counts.items() if k != MISSING)
    body: dict[str, Any] = {
        "protocol": {
            "name": protocol.name,
            "distance": protocol.distance,
            "thresholds": list(protocol.thresholds),
            "strict": protocol.strict_threshold,
        },
        "n_samples": run.n,
        "n_finished": finished,
        "complete": finished == run.n,
        "n_failed": sum(v for k, v in counts.items() if k != TrajectoryStatus.OK.value),
        "n_parsed": score.parsed,
        "status_counts": counts,
        "metrics": protocol_metrics(run.file),
        "agent_parse": {"answered": run.columns.agent_answered},
        "multi_sample": multi_sample_metrics(run),
        "tools": tool_metrics(run.columns, prices or {}),
        "calibration": run_calibration(run),
        "notes": list(score.warnings),
        "breakdowns": breakdowns(
            run, [*dict.fromkeys([*DEFAULT_BREAKDOWNS, *fields, *run.columns.fields.auto()])]
        ),
        "units": dict(UNITS),
    }
    where = wherebench_summary(run.columns.where, run.distances, judgments)
    if where is not None:
        body["wherebench"] = where
    return body
