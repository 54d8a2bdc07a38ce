"""The papers' evaluation figures (issue 43 item 6): Range@N beside pass@k, the distribution of
tool-usage combinations (SpotAgent Fig. 6a), Pearson's r of answer and thinking scores (WhereBench
Table 4) and Cohen's κ of a judge against human labels. Expected values by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geosleuth.core import metrics
from geosleuth.core.records import Sample, ToolCallRecord, Trajectory, Turn
from geosleuth.eval.report.scores import score_run
from geosleuth.eval.report.summary import tool_metrics
from geosleuth.eval.wherebench import rules as wherebench
from geosleuth.scoring.protocols import get_protocol


def test_range_at_n_is_best_minus_worst() -> None:
    d = np.array([[1.0, 2.0], [1.0, 30.0], [40.0, 50.0], [np.nan, 3.0]])
    # at 25 km: Best@N hits rows 1, 2, 4 (3 of 4); Worst@N hits row 1 only (row 4's failed sample
    # is its worst): 3/4 − 1/4 = 1/2
    assert metrics.range_at_n(d, 25.0) == pytest.approx(0.5)
    assert metrics.range_at_n(d, 100.0) == pytest.approx(0.25)  # best 4/4, worst 3/4


def test_pearson_by_hand() -> None:
    # x = 1, 2, 3; y = 2, 4, 7: cov sum = 5, Σdx² = 2, Σdy² = 114/9 → r = 5 / sqrt(2 · 114/9) = 0.99339
    assert metrics.pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(0.99339, abs=1e-5)
    assert math.isnan(metrics.pearson([1, 2], [3, 4]))  # under three pairs
    assert math.isnan(metrics.pearson([1, 1, 1], [3, 4, 5]))  # a constant side


def test_cohen_kappa_by_hand() -> None:
    # 50 items: both yes 20, judge yes / human no 5, judge no / human yes 10, both no 15.
    # p_o = 35/50 = 0.7; p_e = 0.5·0.6 + 0.5·0.4 = 0.5; κ = 0.2 / 0.5 = 0.4
    judge = ["yes"] * 25 + ["no"] * 25
    human = ["yes"] * 20 + ["no"] * 5 + ["yes"] * 10 + ["no"] * 15
    assert metrics.cohen_kappa(judge, human) == pytest.approx(0.4)
    assert metrics.cohen_kappa(["a", "a"], ["a", "a"]) == 1.0
    with pytest.raises(ValueError):
        metrics.cohen_kappa(["a"], ["a", "b"])


def _traj(i: int, *names: str) -> Trajectory:
    calls = [ToolCallRecord(name=n) for n in names]
    return Trajectory(sample_id=str(i), model="m", turns=[Turn(index=0, tool_calls=calls)])


def test_tool_usage_combinations() -> None:
    runs = {
        "0": _traj(0, "image_zoom_in_tool", "search_web"),
        "1": _traj(1, "search_web", "image_zoom_in_tool", "image_zoom_in_tool"),
        "2": _traj(2),
        "3": _traj(3, "maps_geocode"),
    }
    samples = [Sample(id=i, lat=0.0, lon=0.0) for i in runs]
    scored = score_run(samples, runs, get_protocol("default"))
    # two of four used zoom and search (in any order, any count), one geocoding alone, one nothing
    assert tool_metrics(scored.columns, {})["tool_combinations"] == {
        "image_zoom_in_tool+search_web": 0.5,
        "maps_geocode": 0.25,
        "none": 0.25,
    }


def test_wherebench_answer_thinking_pearson() -> None:
    items = [
        wherebench.WhereItem("a", "text", "bilibili", path_score=0.0, clues_used=[False, False]),
        wherebench.WhereItem("b", "text", "bilibili", path_score=0.5, clues_used=[True, False]),
        wherebench.WhereItem("c", "text", "bilibili", path_score=1.0, clues_used=[True, True]),
        wherebench.WhereItem("d", "text", "bilibili", path_score=1.0),  # not judged: left out
    ]
    # answer scores 0, 0.5, 1 and thinking scores 0, 0.5, 1 lie on one line: r = 1
    assert wherebench.wherebench_figures(items)["answer_thinking_pearson"] == pytest.approx(1.0)
