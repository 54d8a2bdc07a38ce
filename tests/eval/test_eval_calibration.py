"""Calibration numbers of summary.json: ECE from core.metrics, bins consistent with it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geosleuth.core import metrics


def test_ece_hand_computed() -> None:
    conf = [0.1, 0.15, 0.9, 0.95, 1.0]
    hits = [False, True, True, True, False]
    # 5 bins: [0.1, 0.15] -> mean conf 0.125, hit rate 0.5; [0.9, 0.95, 1.0] -> 0.95 vs 2/3
    expected = (2 * abs(0.125 - 0.5) + 3 * abs(0.95 - 2 / 3)) / 5
    assert metrics.expected_calibration_error(conf, hits, 5) == pytest.approx(expected)


def test_ece_perfect_and_worst() -> None:
    assert metrics.expected_calibration_error([1.0, 1.0, 0.0], [True, True, False], 5) == 0.0
    assert metrics.expected_calibration_error([1.0, 0.0], [False, True], 5) == 1.0


def test_ece_edges() -> None:
    assert math.isnan(metrics.expected_calibration_error([], [], 5))
    with pytest.raises(ValueError):
        metrics.expected_calibration_error([0.5], [True, False], 5)
    index = metrics.calibration_bin_index([-0.5, 0.0, 0.2, 0.5, 1.0, 7.0], 5)
    assert index.tolist() == [0, 0, 1, 2, 4, 4]


def test_summary_ece_matches_its_bins() -> None:
    from geosleuth.eval.report.scores import ScoreRow
    from geosleuth.eval.report.summary import calibration
    from geosleuth.scoring.protocols import get_protocol

    rng = np.random.default_rng(3)
    rows = [
        ScoreRow(
            sample_id=str(i),
            status="ok",
            answer_type="coordinates",
            true_lat=0.0,
            true_lon=0.0,
            pred_lat=0.0,
            pred_lon=0.0,
            distance_km=float(d),
            country_code=None,
            continent=None,
            choice_correct=None,
            confidence=float(c),
        )
        for i, (d, c) in enumerate(zip(rng.uniform(0, 3000, 40), rng.uniform(0, 1, 40), strict=True))
    ]
    out = calibration(rows, get_protocol("default"))
    from_bins = sum(b["n"] * abs(b["mean_confidence"] - b["hit_rate"]) for b in out["bins"]) / out["n"]
    assert out["n"] == 40 and sum(b["n"] for b in out["bins"]) == 40
    assert out["ece"] == pytest.approx(from_bins, abs=1e-5)
