"""Rewards: values at and around every knot, vectorised forms, failures earn 0."""

from __future__ import annotations

import math

import numpy as np
import pytest

from geosleuth.core import reward_math as R
from geosleuth.core.parsing import parse_answer


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (0.0, 1.0),
        (0.49, 1.0),
        (0.5, 0.8),
        (1.99, 0.8),
        (2.0, 0.6),
        (9.9, 0.6),
        (10.0, 0.4),
        (24.9, 0.4),
        (25.0, 0.2),
        (199.0, 0.2),
        (200.0, 0.1),
        (749.0, 0.1),
        (750.0, 0.0),
        (20000.0, 0.0),
        (math.nan, 0.0),
        (math.inf, 0.0),
        (-1.0, 0.0),
    ],
)
def test_step_reward(d: float, expected: float) -> None:
    assert R.step_reward(d) == expected


@pytest.mark.parametrize(
    ("d", "expected"),
    [
        (0.0, 1.0),
        (1.0, 1.0),
        (13.0, 0.875),
        (25.0, 0.75),
        (112.5, 0.475),
        (199.0, 0.75 - 0.55 * 174.0 / 175.0),
        (200.0, 0.0),  # SpotAgent: 0 at exactly 200 km and beyond (issue 11)
        (200.01, 0.0),
        (5000.0, 0.0),
        (math.nan, 0.0),
    ],
)
def test_piecewise_linear_reward(d: float, expected: float) -> None:
    assert R.piecewise_linear_reward(d) == pytest.approx(expected)


def test_spatial_reward() -> None:
    assert R.spatial_reward(0.0) == 1.0
    assert R.spatial_reward(200.0) == pytest.approx(math.exp(-1))
    assert R.spatial_reward(100.0, tau_km=50.0) == pytest.approx(math.exp(-2))
    assert R.spatial_reward(math.nan) == 0.0
    with pytest.raises(ValueError):
        R.spatial_reward(1.0, tau_km=0.0)


def test_distance_rewards_vectorised_match_scalar() -> None:
    d = np.array([0.1, 1.5, 30.0, 300.0, np.nan, 1000.0])
    for fn in (R.step_reward, R.piecewise_linear_reward, R.spatial_reward):
        vec = fn(d)
        assert isinstance(vec, np.ndarray) and vec.shape == d.shape
        assert vec == pytest.approx([fn(float(x)) for x in d])
    assert R.distance_reward("step", d) == pytest.approx(R.step_reward(d))
    assert R.step_reward(np.array([])).shape == (0,)
    with pytest.raises(ValueError):
        R.distance_reward("nope", d)


def test_hierarchical_reward() -> None:
    assert R.hierarchical_reward(True, True, True) == 4.0
    assert R.hierarchical_reward(True, True, False) == 2.0
    assert R.hierarchical_reward(True, False, False) == 1.0
    assert R.hierarchical_reward(False, False, False) == 0.0
    assert R.hierarchical_reward(True, True, True, beta=3.0, normalize=True) == 1.0
    assert R.hierarchical_reward(True, False, False, normalize=True) == 0.25
    vec = R.hierarchical_reward([True, True, False], [True, False, False], [True, False, False])
    assert vec.tolist() == [4.0, 1.0, 0.0]  # type: ignore[union-attr]


def test_default_similarity() -> None:
    assert R.default_similarity("Deutschland", "Germany", "country") == 1.0
    assert R.default_similarity("France", "Germany", "country") == 0.0
    assert R.default_similarity("Zürich", "ZURICH", "precise") == 1.0
    assert 0.0 < R.default_similarity("Bavaria Munich", "Munich", "region") < 1.0 + 1e-9
    assert R.default_similarity("", "x", "region") == 0.0


def test_semantic_reward_gating() -> None:
    truth = {"country": "Germany", "region": "Bavaria", "precise": "Marienplatz"}
    assert R.semantic_reward(truth, truth) == pytest.approx(1.0)
    wrong_country = {"country": "France", "region": "Bavaria", "precise": "Marienplatz"}
    assert R.semantic_reward(wrong_country, truth) == 0.0
    wrong_region = {"country": "Deutschland", "region": "Saxony", "precise": "Marienplatz"}
    assert R.semantic_reward(wrong_region, truth) == pytest.approx(0.1)
    no_precise = {"country": "Germany", "region": "Bavaria"}
    assert R.semantic_reward(no_precise, truth) == pytest.approx(0.7)
    assert R.semantic_reward({}, truth) == 0.0


def test_semantic_reward_pluggable_similarity_and_failures() -> None:
    truth = {"country": "a", "region": "b", "precise": "c"}
    half = R.semantic_reward(truth, truth, similarity=lambda p, r, lv: 0.6)
    assert half == 0.0  # paper: country 0.6 < 0.7 neither adds nor opens the gate (issue 11)
    released = R.semantic_reward(truth, truth, similarity=lambda p, r, lv: 0.6, gating="released")
    assert released == pytest.approx(0.1 * 0.6)  # released code: the country still adds 0.06

    def broken(p: str, r: str, lv: str) -> float:
        raise RuntimeError("embedding server down")

    assert R.semantic_reward(truth, truth, similarity=broken) == 0.0
    assert R.semantic_reward(truth, truth, similarity=lambda p, r, lv: math.nan) == 0.0
    assert R.semantic_reward(truth, truth, similarity=lambda p, r, lv: 7.0) == pytest.approx(1.0)


def test_semantic_levels_from_prediction() -> None:
    p = parse_answer("<answer>Japan; Tokyo; Shibuya Crossing</answer>")
    assert R.semantic_levels(p) == {"country": "Japan", "region": "Tokyo", "precise": "Shibuya Crossing"}
    assert R.semantic_levels(None) == {}
    assert R.semantic_readings(p) == [R.semantic_levels(p)]  # every level named: one reading


def test_a_place_of_open_level_is_read_at_region_or_precise() -> None:
    p = parse_answer("Hesse, Germany")
    assert p.place == "Hesse" and p.admin1 is None and p.city is None
    assert R.semantic_levels(p) == {"country": "Germany", "region": None, "precise": "Hesse"}
    assert R.semantic_readings(p) == [
        {"country": "Germany", "region": None, "precise": "Hesse"},
        {"country": "Germany", "region": "Hesse", "precise": None},
    ]
    truth = {"country": "Germany", "region": "Hesse", "precise": "Frankfurt"}
    # as the precise place: 0.1·1, then the missing region closes the gate; as the region:
    # 0.1·1 + 0.6·1, and the missing precise place adds 0.3·0
    assert R.best_semantic_reward(R.semantic_readings(p), truth) == pytest.approx(0.7)
    city_truth = {"country": "Germany", "region": "Hesse", "precise": "Hesse"}
    # a place fills one slot only: never more than the full answer (1.0), here 0.7 either way
    assert R.best_semantic_reward(R.semantic_readings(p), city_truth) == pytest.approx(0.7)
    assert R.best_semantic_reward([], truth) == 0.0


def test_combined_reward() -> None:
    assert R.combined_reward(1.0, 1.0, 1.0) == 3.0
    assert R.combined_reward(0.5, 0.2) == pytest.approx(0.95)
    vec = R.combined_reward(np.array([1.0, np.nan]), np.array([0.0, 0.5]), np.array([0.2, 0.2]))
    assert vec == pytest.approx([1.6, 0.6])


def test_unparseable_answer_earns_zero() -> None:
    p = parse_answer("I cannot tell.")
    d = math.nan if not p.has_coords else 0.0
    assert R.step_reward(d) == R.piecewise_linear_reward(d) == R.spatial_reward(d) == 0.0
    assert R.semantic_reward(R.semantic_levels(p), {"country": "France"}) == 0.0


def test_semantic_rewards_batch() -> None:
    truth = {"country": "Germany", "region": "Bavaria", "precise": "Marienplatz"}
    out = R.semantic_rewards([truth, {}], [truth, truth])
    assert out == pytest.approx([1.0, 0.0])
    with pytest.raises(ValueError):
        R.semantic_rewards([truth], [])


def test_text_distance_reward_end_to_end() -> None:
    answer = '{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}'
    assert R.text_distance_reward(answer, 48.8566, 2.3522) == 1.0
    assert R.text_distance_reward(answer, 48.8566, 2.3522 + 0.1, kind="step") == 0.6  # ~7.3 km
    assert R.text_distance_reward("no idea", 0.0, 0.0) == 0.0
    assert R.text_distance_reward(None, 0.0, 0.0, kind="spatial") == 0.0
    unquoted = '{"lat": 48.8566, "lon": 2.3522, "city": Paris, "country": France}'
    assert R.text_distance_reward(unquoted, 48.8566, 2.3522, mode="strict", protocol="twm") == 0.0
    assert math.isnan(R.prediction_distance_km(None, 0.0, 0.0))
