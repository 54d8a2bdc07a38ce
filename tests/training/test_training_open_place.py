"""A lone "X, Country" answer (X in `Prediction.place`, city or province) earns its reward.

Expected values by hand from the formulas: GeoVista β² / β / 1 (β = 2), each level judged on
its own; GeoAgent R_sem = 0.1·s₁ + 0.6·s₂ + 0.3·s₃ with the paper's gates (0.7, 0.5);
R_spa = exp(−d/200 km) of the geocoded text.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing import parse_answer
from geosleuth.training.rewards.batch import score_texts
from geosleuth.training.rewards.consistency import level_queries

EIFFEL = {
    "lat": 48.8584,
    "lon": 2.2945,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}
FRANKFURT = {
    "lat": 50.1109,
    "lon": 8.6821,
    "levels": {"country": "Germany", "admin1": "Hesse", "city": "Frankfurt"},
}
PARIS_CENTRE = (48.85341, 2.3488)  # GeoNames 2988507, the point a geocoder gives for "Paris, France"


def _answer(text: str) -> str:
    return f"<think>French signs, Haussmann facades.</think>\n<answer>{text}</answer>"


def test_the_parser_leaves_the_level_open() -> None:
    p = parse_answer("Paris, France")
    assert (p.place, p.city, p.admin1) == ("Paris", None, None)


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        ("Paris, France", EIFFEL, 4.0),  # Paris is the true city: β² = 4
        ("Île-de-France, France", EIFFEL, 2.0),  # the true state: β = 2
        ("Lyon, France", EIFFEL, 1.0),  # only the country: 1
        ("Hesse, Germany", FRANKFURT, 2.0),
        ("Frankfurt, Germany", FRANKFURT, 4.0),
        ("Paris, Germany", FRANKFURT, 1.0),  # the country alone
        ("Paris, France", FRANKFURT, 0.0),
    ],
)
def test_hierarchical_judges_the_place_at_state_and_city(answer: str, truth: dict, expected: float) -> None:
    assert score_texts("hierarchical", [_answer(answer)], [truth]).scores[0] == expected


@pytest.mark.parametrize(
    ("answer", "truth", "expected"),
    [
        # read as the precise place, the region is missing and closes the paper's gate: 0.1·1;
        # read as the region, s₂(Paris, Île-de-France) = 0 fails 0.5: 0.1·1 as well
        ("Paris, France", EIFFEL, 0.1),
        # read as the region: 0.1·1 + 0.6·1, then the precise place is missing (0.3·0)
        ("Île-de-France, France", EIFFEL, 0.7),
        ("Hesse, Germany", FRANKFURT, 0.7),
        # a full answer still beats any reading of a lone place: 0.1 + 0.6 + 0.3
        ("Country: Germany\nProvince/State: Hesse\nCity: Frankfurt", FRANKFURT, 1.0),
    ],
)
def test_semantic_scores_the_place_at_its_best_level(answer: str, truth: dict, expected: float) -> None:
    assert score_texts("semantic", [_answer(answer)], [truth]).scores[0] == pytest.approx(expected)


def test_spatial_geocodes_the_place_not_the_country() -> None:
    batch = score_texts("spatial", [_answer("Paris, France")], [EIFFEL])
    d = float(batch.distances_km[0])
    # haversine((48.85341, 2.3488), (48.8584, 2.2945)): Δφ = 0.00499° -> 0.555 km north-south,
    # Δλ = 0.0543° · cos 48.856° -> 3.97 km east-west: about 4.0 km (France's centroid is ~240 km)
    assert d == pytest.approx(float(haversine_km(*PARIS_CENTRE, EIFFEL["lat"], EIFFEL["lon"])), abs=0.5)
    assert 3.5 < d < 4.5
    assert batch.scores[0] == pytest.approx(math.exp(-d / 200))
    assert bool(batch.parsed[0])


def test_combined_adds_the_parts() -> None:
    [score] = score_texts("combined", [_answer("Paris, France")], [EIFFEL]).scores
    d = float(score_texts("spatial", [_answer("Paris, France")], [EIFFEL]).distances_km[0])
    assert score == pytest.approx(1.5 * math.exp(-d / 200) + 1.0 * 0.1 + 0.5 * 0.0)


def test_consistency_masks_the_place() -> None:
    text = "<think>The Seine and Haussmann blocks: this is Paris.</think>\n<answer>Paris, France</answer>"
    queries = level_queries(text)
    assert [q.level for q in queries] == ["country", "precise"]
    assert queries[1].conclusion == "Paris"
    assert "Paris" not in queries[1].prompt and "[MASKED]" in queries[1].prompt


NAMES = st.sampled_from(["Paris", "Lyon", "Île-de-France", "Hesse", "Frankfurt", "Bavaria", "Qingdao", "X"])


@settings(max_examples=60, deadline=None)
@given(
    place=NAMES,
    country=st.sampled_from(["France", "Germany", "China"]),
    truth=st.sampled_from([EIFFEL, FRANKFURT]),
)
def test_a_lone_place_never_beats_naming_both_levels(place: str, country: str, truth: dict) -> None:
    """One name fills one slot: R_sem ≤ 0.1 + 0.6 (country and one of region / place, gated)."""
    text = _answer(f"{place}, {country}")
    sem = score_texts("semantic", [text], [truth]).scores[0]
    assert 0.0 <= sem <= 0.7 + 1e-12
    assert score_texts("hierarchical", [text], [truth]).scores[0] in (0.0, 1.0, 2.0, 4.0)
