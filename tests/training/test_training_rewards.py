"""Reward adapters (verl, TRL, ms-swift) on realistic decoded multi-turn rollouts."""

from __future__ import annotations

import asyncio
import json
import math

import pytest

from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing import parse_answer
from geosleuth.training.rewards.batch import (
    ACC_THRESHOLDS_KM,
    RewardSpec,
    acc_key,
    fast_coordinates,
    score_texts,
)
from geosleuth.training.rewards.truth import GroundTruth, completion_text, parse_ground_truth
from geosleuth.training.swift.reward import GeoORM
from geosleuth.training.trl.reward import AsyncGeoRewardFunc, GeoRewardFunc, make_reward_func
from geosleuth.training.verl.reward import compute_score, compute_score_batch

# Eiffel Tower; answers below are placed at known distances from it.
TRUTH = {
    "lat": 48.8584,
    "lon": 2.2945,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}


def _d(lat: float, lon: float, radius_km: float = 6371.0088) -> float:
    return float(haversine_km(lat, lon, TRUTH["lat"], TRUTH["lon"], radius_km=radius_km))


# A Qwen-style decoded multi-turn response (skip_special_tokens=True): a search result that
# quotes a perfect answer in the same JSON format, then the model's own (1.5 km off) answer.
ROLLOUT_JSON = (
    "<think>Iron lattice tower, Haussmann buildings: Paris. Let me search.</think>\n"
    '<tool_call>\n{"name": "web_search", "arguments": {"query": "iron lattice tower"}}\n</tool_call>\n'
    "user\n<tool_response>\n"
    '<answer>{"lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"}</answer>\n'
    "</tool_response>\n"
    "<think>The result confirms Paris, near the Champ de Mars.</think>\n"
    '<answer>{"lat": 48.8650, "lon": 2.2800, "city": "Paris", "country": "France"}</answer>'
)
D_JSON = _d(48.8650, 2.2800)

ROLLOUT_LINES = (
    "<think>French road signs.</think>\n"
    "<answer>\nCountry: France\nCity: Lyon\nLatitude: 45.7640\nLongitude: 4.8357\n</answer>"
)
D_LINES = _d(45.7640, 4.8357)

# Only a tool response carries coordinates: the model never answered.
ROLLOUT_TOOL_ONLY = (
    '<tool_call>{"name": "geocode", "arguments": {"address": "Eiffel Tower"}}</tool_call>\n'
    '<tool_response>{"lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"}</tool_response>'
)

# Two answers: the last one wins.
ROLLOUT_TWO_ANSWERS = (
    '<answer>{"lat": 48.8584, "lon": 2.2945}</answer>\nWait, reconsider.\n'
    '<answer>{"lat": 43.2965, "lon": 5.3698, "city": "Marseille", "country": "France"}</answer>'
)
D_TWO = _d(43.2965, 5.3698)


def test_distances_are_what_the_table_says() -> None:
    assert 1.0 < D_JSON < 2.0
    assert 200 < D_LINES < 750
    assert 200 < D_TWO < 750


@pytest.mark.parametrize(
    ("text", "expected", "distance"),
    [
        (ROLLOUT_JSON, 0.8, D_JSON),  # 1 < d < 2 km -> 0.8, not the 1.0 the tool response quotes
        (ROLLOUT_LINES, 0.1, D_LINES),  # 200 < d < 750 km -> 0.1
        (ROLLOUT_TWO_ANSWERS, 0.1, D_TWO),
        (ROLLOUT_TOOL_ONLY, 0.0, None),
        ("", 0.0, None),
        ("asdf qwerty {{{ <answer> no coordinates here", 0.0, None),
    ],
)
def test_verl_compute_score_step(text: str, expected: float, distance: float | None) -> None:
    out = compute_score("imageo", text, TRUTH)
    assert out["score"] == pytest.approx(expected)
    if distance is None:
        assert out["parsed"] in (0.0, 1.0)
        assert out["distance_km"] == pytest.approx(20015.1)
        assert all(out[acc_key(t)] == 0.0 for t in ACC_THRESHOLDS_KM)
    else:
        assert out["distance_km"] == pytest.approx(distance)
        for t in ACC_THRESHOLDS_KM:
            assert out[acc_key(t)] == (1.0 if distance < t else 0.0)


def test_verl_every_result_has_the_same_keys() -> None:
    keys = {frozenset(compute_score("x", t, TRUTH)) for t in (ROLLOUT_JSON, "", "garbage")}
    assert len(keys) == 1


def test_verl_reward_choice_and_params() -> None:
    piece = compute_score("x", ROLLOUT_JSON, TRUTH, reward="piecewise")["score"]
    assert piece == pytest.approx(1.0 - 0.25 * (D_JSON - 1.0) / 24.0)
    spatial = compute_score("x", ROLLOUT_JSON, TRUTH, reward="spatial", reward_params={"tau_km": 100})[
        "score"
    ]
    assert spatial == pytest.approx(math.exp(-D_JSON / 100))
    assert compute_score("x", ROLLOUT_JSON, TRUTH, reward="spatial:tau_km=100")["score"] == pytest.approx(
        spatial
    )
    # per-row override through extra_info
    row = compute_score("x", ROLLOUT_JSON, TRUTH, extra_info={"reward": "piecewise"})["score"]
    assert row == pytest.approx(piece)
    # beyond 200 km the SpotAgent reward is 0
    assert compute_score("x", ROLLOUT_LINES, TRUTH, reward="linear")["score"] == 0.0


def test_hierarchical_and_semantic() -> None:
    # country + city right, no admin1 in the answer: each level is judged on its own (GeoVista's
    # released reward), so the right city alone earns beta^2 = 4
    assert compute_score("x", ROLLOUT_JSON, TRUTH, reward="hierarchical")["score"] == pytest.approx(4.0)
    full = ROLLOUT_JSON.replace('"city": "Paris", "country": "France"}</answer>', "") + (
        '"city": "Paris", "state": "Ile-de-France", "country": "France"}</answer>'
    )
    assert compute_score("x", full, TRUTH, reward="hierarchical")["score"] == pytest.approx(4.0)
    norm = compute_score("x", full, TRUTH, reward={"name": "hierarchical", "normalize": True})["score"]
    assert norm == pytest.approx(1.0)
    assert compute_score("x", ROLLOUT_LINES, TRUTH, reward="hierarchical")["score"] == pytest.approx(1.0)
    # semantic: country matches (0.1); region missing closes the gate
    assert compute_score("x", ROLLOUT_JSON, TRUTH, reward="semantic")["score"] == pytest.approx(0.1)
    assert compute_score("x", full, TRUTH, reward="semantic")["score"] == pytest.approx(1.0)


def test_geo_similarity_combines_spatial_semantic_consistency() -> None:
    spec = RewardSpec("geo_similarity")
    batch = score_texts(
        spec, [ROLLOUT_JSON], [TRUTH], consistency_fn=lambda texts, truths: [0.5] * len(texts)
    )
    assert batch.scores[0] == pytest.approx(1.5 * math.exp(-D_JSON / 200) + 1.0 * 0.1 + 0.5 * 0.5)
    no_judge = compute_score("x", ROLLOUT_JSON, TRUTH, reward="combined")["score"]
    assert no_judge == pytest.approx(1.5 * math.exp(-D_JSON / 200) + 0.1)


def test_verl_batch_matches_single_and_groups_by_reward() -> None:
    texts = [ROLLOUT_JSON, ROLLOUT_LINES, "", ROLLOUT_TWO_ANSWERS]
    extras = [{}, {"reward": "spatial"}, None, {}]
    batch = compute_score_batch(["x"] * 4, texts, [TRUTH] * 4, extras)
    single = [compute_score("x", t, TRUTH, e) for t, e in zip(texts, extras, strict=True)]
    assert batch == single
    with pytest.raises(ValueError, match="same length"):
        compute_score_batch(["x"], texts, [TRUTH], None)


def test_ground_truth_forms() -> None:
    a = parse_ground_truth(TRUTH)
    assert parse_ground_truth(json.dumps(TRUTH)) == a
    assert parse_ground_truth("48.8584, 2.2945") == GroundTruth(48.8584, 2.2945)
    flat = parse_ground_truth({"lat": 30.389, "lon": -87.683, "city": "Foley", "country": "USA"})
    assert flat.levels == {"city": "Foley", "country": "USA"}
    assert set(a.to_dict()["levels"]) >= {"country", "admin1", "city", "street", "poi"}
    for bad in ("nonsense", {"lat": 1}, {"lat": 95, "lon": 0}, 3.5):
        with pytest.raises(ValueError):
            parse_ground_truth(bad)


def test_completion_text_keeps_only_assistant_turns() -> None:
    conv = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "zoom"}}]},
        {"role": "tool", "content": '<answer>{"lat": 48.8584, "lon": 2.2945}</answer>'},
        {"role": "assistant", "content": [{"type": "text", "text": '<answer>{"lat": 1, "lon": 2}</answer>'}]},
    ]
    text = completion_text(conv)
    assert "48.8584" not in text and '"lat": 1' in text
    assert completion_text(None) == ""


def test_trl_plain_and_conversational_with_metric_hook() -> None:
    logged: dict[str, float] = {}
    extra: dict[str, list[float]] = {}
    fn = make_reward_func("step")
    assert fn.__name__ == "geo_step"
    completions = [ROLLOUT_JSON, "garbage", ROLLOUT_LINES]
    rewards = fn(
        prompts=["p"] * 3,
        completions=completions,
        completion_ids=[[1]] * 3,
        ground_truth=[TRUTH] * 3,
        trainer_state=None,
        log_metric=lambda k, v: logged.__setitem__(k, v),
        log_extra=lambda k, v: extra.__setitem__(k, v),
    )
    assert rewards == pytest.approx([0.8, 0.0, 0.1])
    assert logged["geo/acc@2km"] == pytest.approx(1 / 3)
    assert logged["geo/acc@750km"] == pytest.approx(2 / 3)
    assert logged["geo/parse_rate"] == pytest.approx(2 / 3)
    assert logged["geo/median_distance_km"] == pytest.approx((D_JSON + D_LINES) / 2)
    assert len(extra["geo/distance_km"]) == 3
    # conversational completions with lat/lon columns instead of a ground_truth column
    conv = [[{"role": "assistant", "content": ROLLOUT_JSON}], [{"role": "assistant", "content": ""}]]
    out = GeoRewardFunc("step")(completions=conv, lat=[TRUTH["lat"]] * 2, lon=[TRUTH["lon"]] * 2)
    assert out == pytest.approx([0.8, 0.0])
    with pytest.raises(ValueError, match="ground_truth"):
        fn(completions=["x"], prompts=["p"])


def test_trl_async_reward() -> None:
    fn = make_reward_func("piecewise", asynchronous=True)
    assert isinstance(fn, AsyncGeoRewardFunc)
    out = asyncio.run(fn(completions=[ROLLOUT_JSON], ground_truth=[json.dumps(TRUTH)]))
    assert out == pytest.approx([1.0 - 0.25 * (D_JSON - 1.0) / 24.0])


def test_swift_orm() -> None:
    orm = GeoORM("step")
    assert orm([ROLLOUT_JSON, "", ROLLOUT_LINES], solution=[json.dumps(TRUTH)] * 3) == pytest.approx(
        [0.8, 0.0, 0.1]
    )


def test_unknown_reward_name() -> None:
    with pytest.raises(ValueError, match="unknown reward"):
        RewardSpec.parse("fancy")
    with pytest.raises(ValueError, match="key=value"):
        RewardSpec.parse("spatial:tau")


FAST_CASES = [
    ('<answer>{"lat": 10.5, "lon": -20.25}</answer>', True),
    (ROLLOUT_JSON, True),
    ('<answer>{"lat": 1, "lon": 2}</answer> trailing words', True),
    ('<tool_response><answer>{"lat": 1, "lon": 2}</answer>', False),  # unclosed tool response
    ('<tool_call><answer>{"lat": 1, "lon": 2}</answer></tool_call>', False),
    ('<answer>{"lat": 1, "lon": 2}</answer><answer>{"lat": 3', False),  # a later, unclosed answer
    ('<answer>{"lat": 120, "lon": 45}</answer>', False),  # swapped: left to the robust parser
    ('<answer>{"lat": "48.1", "lon": "2.3"}</answer>', False),
    ('<answer>{"latitude": 1, "lon": 2, "lat": 3}</answer>', False),
    ('<answer>{"lat": 1, "lon": 2, "loc": {"lat": 5}}</answer>', False),
    ('<answer>{"lat": NaN, "lon": 2}</answer>', False),
    ("<answer>48.1, 2.3</answer>", False),
    ("", False),
]


@pytest.mark.parametrize(("text", "fast"), FAST_CASES)
def test_fast_path_agrees_with_the_robust_parser(text: str, fast: bool) -> None:
    got = fast_coordinates(text)
    assert (got is not None) == fast
    pred = parse_answer(text)
    if got is not None:
        assert (pred.lat, pred.lon) == got
    batch = score_texts("step", [text], [TRUTH])
    expected = math.nan if not pred.has_coords else _d(pred.lat, pred.lon)  # type: ignore[arg-type]
    assert batch.distances_km[0] == pytest.approx(expected, nan_ok=True)


@pytest.mark.parametrize(
    ("answer", "lat", "lon"),
    [
        ("<answer>France; Île-de-France; Paris; 48.8566; 2.3522</answer>", 48.8566, 2.3522),  # GeoVista
        ('{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}', 48.85, 2.35),  # TwM JSON
        ("It is at 48°51'N 2°21'E, in Paris.", 48.85, 2.35),  # degrees-minutes
        ("<answer>(48.8566, 2.3522)</answer>", 48.8566, 2.3522),
        ('```json\n{"latitude": 48.8566, "longitude": 2.3522}\n```', 48.8566, 2.3522),
    ],
)
def test_each_answer_format_scores_by_its_distance(answer: str, lat: float, lon: float) -> None:
    text = (
        "<think>Paris, Left Bank.</think>\n<tool_response>Latitude: 10.0, Longitude: 10.0</tool_response>\n"
        + answer
    )
    out = compute_score("x", text, TRUTH, reward="spatial")
    assert out["distance_km"] == pytest.approx(_d(lat, lon, 6371.0), abs=1e-6)  # GeoAgent: R = 6371
    assert out["score"] == pytest.approx(math.exp(-_d(lat, lon, 6371.0) / 200.0))
    assert compute_score("x", text, TRUTH)["score"] == 0.6  # 2 km < d < 10 km
