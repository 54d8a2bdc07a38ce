"""Static report plots (matplotlib, Agg backend): accuracy vs threshold, error CDF, per-continent bars."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from geosleuth.core import metrics
from geosleuth.eval.report.scores import ScoreRow

CURVE_KM = np.logspace(-1, np.log10(20000), 200)
CDF_POINTS = 4096
"""Points of the error CDF (more than the figure's pixels across)."""


def write_plots(folder: Path, rows: Iterable[ScoreRow], summary: dict[str, Any]) -> list[str] | str:
    """PNG files under ``folder``; returns their names, or why none were drawn."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "matplotlib is not installed: pip install matplotlib"
    located = (r.distance_km for r in rows if r.true_lat is not None and r.answer_type != "choice")
    d = np.fromiter(located, dtype=np.float64)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    if d.size:
        fig, ax = plt.subplots(figsize=(6, 4))
        acc = [float(metrics.hits_at(d, km).mean()) * 100 for km in CURVE_KM]
        ax.semilogx(CURVE_KM, acc)
        for km in metrics.resolve_thresholds(summary["protocol"]["thresholds"]):
            ax.axvline(km, color="0.85", lw=0.8, zorder=0)
        ax.set(
            xlabel="distance threshold (km)",
            ylabel="accuracy (%)",
            ylim=(0, 100),
            title="Accuracy vs distance threshold",
        )
        fig.tight_layout()
        fig.savefig(folder / "accuracy_vs_threshold.png", dpi=110)
        plt.close(fig)
        written.append("accuracy_vs_threshold.png")

        fig, ax = plt.subplots(figsize=(6, 4))
        charged = np.sort(metrics.charged_distances(d))
        ranks = np.arange(charged.size)
        if charged.size > CDF_POINTS:  # a step per sample draws the same curve as CDF_POINTS quantiles
            ranks = np.unique(np.linspace(0, charged.size - 1, CDF_POINTS).astype(np.int64))
        ax.semilogx(
            np.maximum(charged[ranks], 0.01),
            (ranks + 1) / charged.size * 100,
            drawstyle="steps-post",
        )
        ax.set(xlabel="error (km, failures at max)", ylabel="samples (%)", ylim=(0, 100), title="Error CDF")
        fig.tight_layout()
        fig.savefig(folder / "error_cdf.png", dpi=110)
        plt.close(fig)
        written.append("error_cdf.png")
    continents = summary["breakdowns"].get("continent", {})
    key = next(
        (
            k
            for k in ("acc@25km", "acc@200km", "acc_country", "text_acc_country")
            if any(k in g for g in continents.values())
        ),
        None,
    )
    if continents and key:
        names = list(continents)
        values = [continents[n].get(key) or 0.0 for n in names]  # stored in percent
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.bar(names, values)
        ax.set(ylabel=f"{key} (%)", ylim=(0, 100), title=f"{key} by continent")
        ax.tick_params(axis="x", rotation=30)
        fig.tight_layout()
        fig.savefig(folder / "continent_accuracy.png", dpi=110)
        plt.close(fig)
        written.append("continent_accuracy.png")
    return written
