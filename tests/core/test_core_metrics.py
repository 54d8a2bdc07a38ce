"""Metrics: thresholds, scores, level accuracy, path score, Shapley, pass@K, bootstrap."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core import metrics as M
from geosleuth.core.geo import geodesic_km, haversine_km


def test_threshold_names_use_shortest_decimal() -> None:
    assert [M.threshold_name(t) for t in (0.5, 2, 25.0, 2500, 0.25, 1e-3)] == [
        "acc@0.5km",
        "acc@2km",
        "acc@25km",
        "acc@2500km",
        "acc@0.25km",
        "acc@0.001km",
    ]


def test_presets_and_custom_thresholds() -> None:
    assert M.resolve_thresholds("map") == (0.5, 2.0, 10.0, 25.0, 200.0, 750.0)
    assert M.resolve_thresholds("classic") == (1.0, 25.0, 200.0, 750.0, 2500.0)
    assert M.resolve_thresholds("street") == (1.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0)
    assert M.resolve_thresholds("10, 0.5,10") == (0.5, 10.0)
    for bad in ("", "fast", "-1", "nan"):
        with pytest.raises(ValueError):
            M.resolve_thresholds(bad)


def test_acc_at_k_strict_and_nan_is_miss() -> None:
    d = np.array([0.4, 0.5, 1.9, np.nan, 800.0])
    acc = M.acc_at_k(d, [0.5, 2, 750])
    assert acc == {0.5: 0.2, 2.0: 0.6, 750.0: 0.6}
    inclusive = M.acc_at_k(d, [0.5], strict=False)
    assert inclusive[0.5] == pytest.approx(0.4)


def test_empty_and_one_row() -> None:
    assert all(math.isnan(v) for v in M.acc_at_k([], "map").values())
    assert math.isnan(M.median_km([])) and math.isnan(M.mean_km([])) and math.isnan(M.geoguessr_score([]))
    assert M.acc_at_k([3.0], [1, 5]) == {1.0: 0.0, 5.0: 1.0}
    assert M.median_km([3.0]) == 3.0 and M.mean_km([3.0]) == 3.0


def test_failures_charged_max_distance_in_median_and_mean() -> None:
    d = [1.0, 2.0, np.nan]
    assert M.median_km(d) == 2.0
    assert M.mean_km(d) == pytest.approx((3.0 + M.MAX_DISTANCE_KM) / 3)
    assert abs(M.MAX_DISTANCE_KM - 20015.1) < 0.1


def test_geoguessr_and_geoscore() -> None:
    d = np.array([0.0, 1492.7, np.nan])
    assert M.geoguessr_points(d) == pytest.approx([5000.0, 5000.0 / math.e, 0.0])
    assert M.geoguessr_score(d) == pytest.approx((5000.0 + 5000.0 / math.e) / 3)
    assert M.geoscore_points([1805.0]) == pytest.approx([5000.0 / math.e])
    assert M.geoscore([0.0]) == 5000.0


def test_share_below_3km() -> None:
    assert M.share_below([2.9, 3.0, np.nan, 0.0]) == 0.5


def test_distance_edge_cases_feed_metrics() -> None:
    # antimeridian, poles, identical points
    d = haversine_km(
        [0.0, 89.9, 90.0, 10.0], [179.9, 0.0, 0.0, 10.0], [0.0, 89.9, 90.0, 10.0], [-179.9, 180.0, 77.0, 10.0]
    )
    assert d[0] == pytest.approx(22.24, abs=0.01)
    assert d[1] == pytest.approx(22.24, abs=0.01)
    assert d[2] == pytest.approx(0.0, abs=1e-6) and d[3] == 0.0
    g = geodesic_km([0.0], [179.9], [0.0], [-179.9])
    assert M.acc_at_k(g, [25])[25.0] == 1.0 and M.acc_at_k(g, [10])[10.0] == 0.0


def test_label_hits_osv_semantics() -> None:
    assert M.label_hits(["A", "", None, "B"], ["A", "", "", "C"]).tolist() == [True, True, True, False]
    assert M.label_hits(["A", ""], ["A", ""], missing_is_miss=True).tolist() == [True, False]


def test_level_hits_from_coordinates_nested() -> None:
    pred = {
        "country": ["US", "US", "FR"],
        "admin1": ["Illinois", "Missouri", "IDF"],
        "city": ["Springfield"] * 3,
    }
    true = {
        "country": ["US", "US", "US"],
        "admin1": ["Illinois", "Illinois", "Illinois"],
        "city": ["Springfield"] * 3,
    }
    hits = M.level_hits_from_coordinates(pred, true)
    assert hits["country"].tolist() == [True, True, False]
    assert hits["admin1"].tolist() == [True, False, False]
    assert hits["city"].tolist() == [True, False, False]


def test_text_matching_multilingual_alias_and_containment() -> None:
    assert M.text_matches("Deutschland", "Germany", "country")
    assert M.text_matches("United States", "USA", "country")
    assert M.text_matches("美国", "USA", "country")
    assert not M.text_matches("Canada", "USA", "country")
    assert M.text_matches("São Paulo", "Sao Paulo", "city")
    assert M.text_matches("New York City", "New York", "city")
    assert not M.text_matches("York", "Yorkshire", "city")
    assert not M.text_matches(None, "Paris", "city") and not M.text_matches("Paris", "", "city")
    assert M.text_matches("Wien", "Vienna", "city", aliases=lambda p, t, lv: {p, t} == {"Wien", "Vienna"})


def test_level_hits_from_text_finer_implies_coarser() -> None:
    pred = {"country": ["Canada", None, "France"], "city": ["Paris", "Tokyo", "Lyon"]}
    truth = {"country": ["France", "Japan", "France"], "city": ["Paris", "Kyoto", "Paris"]}
    hits = M.level_hits_from_text(pred, truth)
    assert hits["city"].tolist() == [True, False, False]
    assert hits["country"].tolist() == [True, False, True]
    assert "admin1" not in hits


def test_path_score_with_hints() -> None:
    correct = {"country": True, "admin1": True, "city": False, "admin2": True}
    assert M.path_score(correct, "admin2") == pytest.approx(2 / 4)
    assert M.path_score(correct, "admin2", hint_level="country") == pytest.approx(1 / 3)
    assert M.path_score(correct, "admin2", hint_level="admin1") == 0.0
    assert M.path_score({"country": True}, "country") == 1.0
    assert M.path_score(correct, "admin2", copied_hint=True) == 0.0
    assert M.path_score(correct, "country", hint_level="country") == 0.0
    assert M.path_score(correct, "planet") == 0.0


def test_choice_accuracy() -> None:
    assert M.choice_accuracy(["A", "b", None, "D"], ["A", "B", "C", "C"]) == 0.5
    assert math.isnan(M.choice_accuracy([], []))
    with pytest.raises(ValueError):
        M.choice_accuracy(["A"], ["A", "B"])


def test_thinking_score_vanilla_and_weighted() -> None:
    assert M.thinking_score([True, False, True, True]) == 0.75
    # WhereBench Eq. 5: Σ wᵢ·sᵢ exactly, no division by Σw (released weights need not sum to 1)
    assert M.thinking_score([True, False], weights=[3.0, 1.0]) == 3.0
    assert M.thinking_score([True, False, True], weights=[0.25, 0.5, 0.5]) == 0.75
    assert math.isnan(M.thinking_score([]))
    assert M.thinking_score([True], weights=[0.0]) == 0.0
    with pytest.raises(ValueError):
        M.thinking_score([True, False], weights=[1.0])


def test_shapley_additive_game_gives_weights() -> None:
    w = [0.5, 2.0, 1.5]
    phi = M.shapley_values(lambda s: sum(w[i] for i in s), 3)
    assert phi == pytest.approx(w)


def test_shapley_glove_game_efficiency_and_symmetry() -> None:
    # value 1 when clue 0 and at least one of clues 1, 2 are present
    def v(s: frozenset[int]) -> float:
        return 1.0 if 0 in s and (1 in s or 2 in s) else 0.0

    phi = M.shapley_values(v, 3)
    assert phi == pytest.approx([2 / 3, 1 / 6, 1 / 6])
    assert phi.sum() == pytest.approx(v(frozenset({0, 1, 2})) - v(frozenset()))
    assert M.shapley_values(lambda s: 1.0, 0).size == 0
    with pytest.raises(ValueError):
        M.shapley_values(lambda s: 0.0, 21)


def test_pass_at_k_matches_combinatorial_definition() -> None:
    rng = np.random.default_rng(1)
    c = rng.random((30, 8)) < 0.3
    for k in (1, 3, 8):
        expected = np.mean(
            [
                1 - math.comb(8 - int(row.sum()), k) / math.comb(8, k) if 8 - row.sum() >= k else 1.0
                for row in c
            ]
        )
        assert M.pass_at_k(c, k) == pytest.approx(expected)
    assert M.pass_at_k(c, 1) == pytest.approx(c.mean())
    with pytest.raises(ValueError):
        M.pass_at_k(c, 9)
    assert math.isnan(M.pass_at_k(np.zeros((0, 4), dtype=bool), 2))


def test_pass_at_k_equals_brute_force_over_subsets() -> None:
    row = np.array([[True, False, False, True, False]])
    k = 2
    subsets = list(itertools.combinations(range(5), k))
    brute = np.mean([row[0, list(s)].any() for s in subsets])
    assert M.pass_at_k(row, k) == pytest.approx(brute)


def test_best_of_n() -> None:
    d = np.array([[5.0, np.nan, 2.0], [np.nan, np.nan, np.nan]])
    best = M.best_of_n(d)
    assert best[0] == 2.0 and math.isnan(best[1])
    assert M.best_of_n(np.zeros((2, 0))).shape == (2,)


def test_bootstrap_ci_seeded_and_sane() -> None:
    h = np.r_[np.ones(30, bool), np.zeros(70, bool)]
    lo, hi = M.bootstrap_ci(h, seed=3)
    assert (lo, hi) == M.bootstrap_ci(h, seed=3)
    assert lo < 0.3 < hi and lo > 0.18 and hi < 0.42
    assert M.bootstrap_ci(np.ones(10, bool)) == (1.0, 1.0)
    assert all(math.isnan(x) for x in M.bootstrap_ci([]))


def test_bootstrap_mean_ci_brackets_mean() -> None:
    x = np.random.default_rng(0).normal(10, 2, 500)
    lo, hi = M.bootstrap_ci_mean(x, n_boot=300)
    assert lo < x.mean() < hi and hi - lo < 1.0


def test_text_match_is_not_fooled_by_a_name_ending_in_another():
    assert not M.text_matches("Virginia", "West Virginia", "admin1")
    assert not M.text_matches("New York", "York", "city")
    assert not M.text_matches("Jose", "San Jose", "city")
    assert M.text_matches("Frankfurt", "Frankfurt am Main", "city")


def test_identical_names_match_without_resolving_them() -> None:
    """Same text is the same place at every level; an unknown country name needs no index lookup."""
    from geosleuth.core.metrics import text_matches

    def no_resolve(name: str) -> str | None:
        raise AssertionError("resolved")

    assert text_matches("Atlantis", "Atlantis", "country", resolve_country=no_resolve)
    assert text_matches("Springfield", "Springfield", "city")
    assert not text_matches("Atlantis", "Lemuria", "country", resolve_country=lambda n: None)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60),
    st.floats(0.0, 1.0, exclude_max=True),
)
def test_percentile_interval_is_numpy_quantile_bit_for_bit(values: list[float], confidence: float) -> None:
    """The CI helper replaces np.quantile (which imports numpy.ma at start-up): same floats exactly."""
    x = np.asarray(values)
    alpha = (1.0 - confidence) / 2.0
    expected = tuple(float(v) for v in np.quantile(x, [alpha, 1.0 - alpha]))
    assert M.percentile_interval(x, confidence) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), max_size=60))
def test_median_finite_is_numpy_median_bit_for_bit(values: list[float]) -> None:
    x = np.asarray(values, dtype=np.float64)
    expected = float(np.median(x)) if x.size else math.nan
    got = M.median_finite(x)
    assert got == expected or (math.isnan(got) and math.isnan(expected))
    assert list(x) == values  # not in place: the caller's array is untouched


def test_bootstrap_mean_blocks_draw_the_same_resamples() -> None:
    """The resample indices are one seeded stream, so cutting it into smaller blocks (whole
    resamples, or each resample in pieces) gives the same interval; the definition by hand: the
    b-th resample is the b-th run of n draws of ``integers(0, n)`` and its mean is the statistic."""
    x = np.random.default_rng(1).normal(10, 2, 101)
    rng = np.random.default_rng(4)
    means = np.array([x[rng.integers(0, x.size, size=x.size)].mean() for _ in range(40)])
    expected = M.percentile_interval(means, 0.95)
    assert M.bootstrap_ci_mean(x, n_boot=40, seed=4) == pytest.approx(expected, rel=1e-12)  # one block
    three = M.bootstrap_ci_mean(x, n_boot=40, seed=4, block=303)  # 3 resamples a block
    assert three == pytest.approx(expected, rel=1e-12)
    pieces = M.bootstrap_ci_mean(x, n_boot=40, seed=4, block=10)  # each resample in 11 pieces
    assert pieces == pytest.approx(expected, rel=1e-12)
