"""`geosleuth.reward(name, **params)` scores as the verl, TRL and ms-swift entry points do."""

from __future__ import annotations

import json
from typing import Any

import pytest

import geosleuth
from geosleuth.training.rewards.registry import RewardSpec
from geosleuth.training.swift.reward import GeoORM
from geosleuth.training.trl.reward import make_reward_func
from geosleuth.training.verl.reward import compute_score

TRUTH = {
    "lat": 48.8566,
    "lon": 2.3522,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}
TEXTS = [
    '<answer>{"lat": 48.86, "lon": 2.34, "city": "Paris", "country": "France"}</answer>',
    '<answer>{"lat": 45.764, "lon": 4.8357, "city": "Lyon", "country": "France"}</answer>',
    "<answer>Country: Germany\nCity: Berlin\nLatitude: 52.52\nLongitude: 13.405</answer>",
    "I cannot tell.",
]
CASES: list[tuple[str, dict[str, Any]]] = [
    ("step", {}),
    ("piecewise", {}),
    ("spatial", {"tau_km": 100.0}),
    ("spatial", {"released": True}),
    ("hierarchical", {"beta": 3.0}),
    ("step", {"released": True}),
]


@pytest.mark.parametrize(("name", "params"), CASES)
def test_reward_equals_the_engines_entry_points(name: str, params: dict[str, Any]) -> None:
    reward = geosleuth.reward(name, **params)
    ours = [reward(text, TRUTH) for text in TEXTS]
    spec = RewardSpec(name, params)
    verl = [compute_score("geo", t, TRUTH, reward=name, reward_params=params)["score"] for t in TEXTS]
    trl = make_reward_func(spec)(completions=TEXTS, ground_truth=[json.dumps(TRUTH)] * len(TEXTS))
    swift = GeoORM(reward=spec)(TEXTS, solution=[json.dumps(TRUTH)] * len(TEXTS))
    assert ours == pytest.approx(verl, abs=1e-9)
    assert ours == pytest.approx(trl, abs=1e-9)
    assert ours == pytest.approx(swift, abs=1e-9)
    assert reward.batch(TEXTS, [TRUTH] * len(TEXTS)) == pytest.approx(ours, abs=1e-9)
    assert reward.details(TEXTS[0], TRUTH)["score"] == pytest.approx(ours[0])


def test_reward_values_are_the_papers() -> None:
    """By hand: Paris answered 0.9 km off (step: < 2 km -> 0.8), Lyon ~392 km (750 km band -> 0.1)."""
    step = geosleuth.reward("step")
    assert [step(t, TRUTH) for t in TEXTS] == [0.8, 0.1, 0.0, 0.0]
    hierarchical = geosleuth.reward("hierarchical")  # beta 2: city 4, country only 1
    assert hierarchical(TEXTS[0], TRUTH) == 4.0 and hierarchical(TEXTS[1], TRUTH) == 1.0


def test_a_bad_reward_fails_when_it_is_named() -> None:
    with pytest.raises(ValueError, match="unknown reward"):
        geosleuth.reward("nope")
    with pytest.raises(ValueError, match="tau"):
        geosleuth.reward("step", tau_km=5)
