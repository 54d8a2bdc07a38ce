"""GeoBench's GeoGuessr-map figures of a run (``summary.json``'s ``geoguessr_map`` block).

A run over a GeoBench map folder carries the map's bounds on every sample (the dataset layout puts
them there); the figures are ``scoring.geoguessr_map``'s over the run's answers, a sample without
an answer (failed, unparsed, missing) counting as a refusal as in GeoBench. The answers are the
ones the run recorded (its parser read them when the model replied); ``geosleuth score`` with
``--protocol geoguessr-map`` re-reads the raw replies with GeoBench's own regex.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from geosleuth.core.records import Sample, TrajectoryStatus
from geosleuth.eval.report.scores import RecordStats
from geosleuth.scoring.geoguessr_map import MapBounds, haversine_km, map_figures, same_country


def _bounds(samples: Sequence[Sample]) -> MapBounds | str:
    """The one map the samples are on, or why there is none."""
    found = {tuple(s.metadata["map_bounds"]) for s in samples if s.metadata.get("map_bounds") is not None}
    if not found:
        return "the dataset gives no map bounds (a GeoBench metadata.json folder does)"
    if len(found) > 1:
        return f"the samples come from {len(found)} maps; score each map's file with --map"
    try:
        return MapBounds(*(float(v) for v in next(iter(found))))
    except (TypeError, ValueError) as exc:
        return f"the dataset's map bounds are unusable: {exc}"


def run_map_figures(
    samples: Sequence[Sample], records: Mapping[str, RecordStats], seed: int = 0
) -> dict[str, Any]:
    """``{n, answered, figures…, ci95, notes}`` over samples with true coordinates, or ``{notes}``."""
    scored = [s for s in samples if s.lat is not None and s.lon is not None]
    bounds = _bounds(scored)
    if isinstance(bounds, str) or not scored:
        return {"notes": [bounds if isinstance(bounds, str) else "no sample has true coordinates"]}
    guesses = []
    for sample in scored:
        stats = records.get(sample.id)
        ok = stats is not None and stats.status == TrajectoryStatus.OK and stats.prediction is not None
        guesses.append(stats.prediction if ok and stats.prediction.has_coords else None)  # type: ignore[union-attr]
    refused = np.array([g is None for g in guesses])
    distance = haversine_km(
        [s.lat for s in scored],
        [s.lon for s in scored],
        [np.nan if g is None else g.lat for g in guesses],
        [np.nan if g is None else g.lon for g in guesses],
    )
    correct = np.array(
        [
            g is not None and same_country(s.labels.get("country"), g.country)
            for s, g in zip(scored, guesses, strict=True)
        ]
    )
    figures = map_figures(refused, distance, correct, bounds, seed=seed)
    return {
        "n": figures.n,
        "answered": figures.answered,
        **{k: round(v, 6) for k, v in figures.values.items()},
        "ci95": {k: [round(lo, 6), round(hi, 6)] for k, (lo, hi) in figures.ci95.items()},
        "notes": figures.notes,
    }


def geoguessr_map_markdown(block: Mapping[str, Any] | None) -> list[str]:
    """The block as Markdown lines for ``summary.md`` (nothing when the run has none)."""
    if not block:
        return []
    lines = ["", "## GeoGuessr map (GeoBench)", ""]
    if "n" in block:
        names = ("refusal_rate", "acc_country", "geoguessr_mean", "geoguessr_median", "mean_km", "median_km")
        lines += ["| figure | value |", "|---|---|"]
        lines += [
            f"| {k}{' (%)' if k in ('refusal_rate', 'acc_country') else ''} | {block[k]:.2f} |"
            for k in names
            if k in block
        ]
        lines.append(f"| map diagonal km | {block['map_diagonal_km']:.1f} |")
    lines += [f"\nNote: {n}." for n in block.get("notes", [])]
    return lines
