"""verl's single-call reward path (no arrays, no pydantic) gives what the full parser + NumPy path gives.

The reference is the slow path spelled out: the robust parser on every text, then
`score_predictions` (vectorised NumPy). Texts are random assemblies of realistic and awkward
pieces: answers quoted inside tool responses, upper-case tags, unclosed blocks, several
answers, answer lines with bullets, bold keys, commas, hemispheres, swapped or invalid values.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from geosleuth.core import reward_math as core
from geosleuth.core.geo import destination, haversine_km
from geosleuth.training.rewards.batch import (
    ACC_THRESHOLDS_KM,
    RewardSpec,
    _distance_one,
    _piecewise_one,
    _step_one,
    fast_coordinates,
    parse_rollout,
    score_predictions,
)
from geosleuth.training.rewards.truth import parse_ground_truth
from geosleuth.training.verl.reward import compute_score, compute_score_batch

TRUTH = {"lat": 48.8584, "lon": 2.2945}

ANSWERS = [
    '<answer>{"lat": 48.8650, "lon": 2.2800, "city": "Paris", "country": "France"}</answer>',
    '<answer>{"lat": 45.764, "lon": 4.8357}</answer>',
    '<answer>\n{\n  "lat": 48.0,\n  "lon": 2,\n  "note": "a } brace"\n}\n</answer>',
    '<answer>{"Lat": 10, "lat": 48.1, "lon": 2.2}</answer>',
    '<answer>{"lat": 48.1, "lon": 2.2, "LAT": 10}</answer>',
    '<answer>{"latitude": 43.3, "longitude": 5.4}</answer>',
    '<answer>{"lat": 48.1, "lng": 9.9, "lon": 2.2}</answer>',
    '<answer>{"lat": "48.1", "lon": "2.3"}</answer>',
    '<answer>{"location": {"lat": 40.4, "lon": -3.7}}</answer>',
    '<answer>{"lat": 120, "lon": 45}</answer>',
    '<answer>{"lat": 95, "lon": 200}</answer>',
    '<answer>{"lat": NaN, "lon": 2}</answer>',
    '<answer>{"lat": true, "lon": 2}</answer>',
    '<answer>{"lat": 48.1, "lon": 2.2} and some words</answer>',
    "<answer>{lat: 48.1, lon: 2.2}</answer>",
    "<answer>\nCountry: France\nCity: Lyon\nLatitude: 45.7640\nLongitude: 4.8357\n</answer>",
    "<answer>Latitude: -33.86\nLongitude: 151.21</answer>",
    "<answer>\n- **Latitude:** 35.68\n- **Longitude:** 139.69\n</answer>",
    "<answer>Lat: 1.5\nLatitude: 7\nLongitude: 3\nLon: 4</answer>",
    "<answer>Latitude: 45,76\nLongitude: 4,83</answer>",
    "<answer>Latitude: 45.76 N\nLongitude: 4.83 E</answer>",
    "<answer>Latitude: 45°45'N\nLongitude: 4°50'E</answer>",
    "<answer>Country: France, City: Lyon, Latitude: 45.76, Longitude: 4.83</answer>",
    "<answer>City: Lyon, France\nLatitude: 45.76\nLongitude: 4.83</answer>",
    "<answer>Latitude: 145.76\nLongitude: 4.83</answer>",
    "<answer>Latitude: 45.76</answer>",
    "<answer>Coordinates: 45.76, 4.83</answer>",
    "<answer>Latitude : 12\nLongitude： 13</answer>",
    "<answer>Lati tude: 12\nlongitude: 13</answer>",
    "<answer>纬度: 31.23\n经度: 121.47</answer>",
    "<answer>France; Île-de-France; Paris</answer>",
    "<answer>48.8566, 2.3522</answer>",
    "<answer>Paris, France</answer>",
    "<answer>   </answer>",
    "<answer></answer>",
    '<ANSWER>{"lat": 1.0, "lon": 2.0}</ANSWER>',
    "<Answer>Latitude: 3\nLongitude: 4</answer>",
    '<answer>{"lat": 5, "lon": 6}',
    '<answer>{"lat": 7, "lon": 8}</answer><answer>',
    '<answer><b>{"lat": 7, "lon": 8}</b></answer>',
    '<answer>{"lat": 7, "lon": 8}<tool_response>{"lat": 1, "lon": 1}</tool_response></answer>',
    '<answer><answer>{"lat": 7, "lon": 8}</answer>',
]
NOISE = [
    "<think>Iron lattice tower, Haussmann buildings.</think>\n",
    '<think>Maybe <answer>{"lat": 0, "lon": 0}</answer> no.</think>\n',
    "<think>unclosed thought ",
    '<tool_call>{"name": "web_search", "arguments": {"query": "tower"}}</tool_call>\n',
    '<tool_response><answer>{"lat": 48.8584, "lon": 2.2945}</answer></tool_response>\n',
    "<tool_response>Latitude: 10.0\nLongitude: 10.0</tool_response>\n",
    "<TOOL_RESPONSE><answer>Latitude: 11\nLongitude: 12</answer></TOOL_RESPONSE>\n",
    '<observation><answer>{"lat": 13, "lon": 14}</answer></observation>\n',
    '<tool_response><tool_call>nested</tool_call><answer>{"lat": 15, "lon": 16}</answer></tool_response>\n',
    "<tool_response>unclosed result ",
    "<tool_call>unclosed call ",
    "</tool_response>",
    "</answer>",
    "<answer>",
    "user\n",
    "Final answer: somewhere near Paris.\n",
    "The photo was taken at 48.85, 2.35 I think.\n",
    "<tool_response>Paris is at 48°51'N 2°21'E</tool_response>\n",
    '<anſwer>{"lat": 20, "lon": 20}</anſwer>\n',
    "Zürich İstanbul 東京\n",
]


def _texts(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    texts = list(ANSWERS) + [""]
    for _ in range(n):
        pieces = [rng.choice(NOISE) for _ in range(rng.randint(0, 4))]
        pieces += [rng.choice(ANSWERS) for _ in range(rng.randint(0, 2))]
        rng.shuffle(pieces)
        if rng.random() < 0.7:
            pieces.append(rng.choice(ANSWERS))
        texts.append("".join(pieces))
    return texts


TEXTS = _texts(2500)


def _reference(spec: RewardSpec, text: str) -> dict[str, float]:
    pred = parse_rollout(text)
    return score_predictions(spec, [pred], [parse_ground_truth(TRUTH)]).item_info(0)


def test_the_fast_path_reads_the_same_coordinates_as_the_parser() -> None:
    taken = 0
    for text in TEXTS:
        got = fast_coordinates(text)
        if got is not None:
            taken += 1
            pred = parse_rollout(text)  # the reward's full path: tool blocks removed, then the parser
            assert (pred.lat, pred.lon) == got, text
    assert taken > len(TEXTS) // 10
    common = [ANSWERS[0], ANSWERS[2], ANSWERS[15], ANSWERS[17], NOISE[4] + NOISE[5] + ANSWERS[16]]
    assert all(fast_coordinates(t) is not None for t in common)  # the common cases take the fast path


@pytest.mark.parametrize("reward", ["step", "piecewise", "spatial", "spatial:tau_km=25"])
def test_single_calls_equal_the_full_path(reward: str) -> None:
    spec = RewardSpec.parse(reward)
    for text in TEXTS:
        got = compute_score("src", text, TRUTH, reward=reward)
        want = _reference(spec, text)
        assert list(got) == list(want), text
        for key, value in want.items():
            if key in ("score", "distance_km"):
                assert got[key] == pytest.approx(value, rel=1e-12, abs=1e-12), (key, text)
            else:
                assert got[key] == value, (key, text)


def test_single_calls_equal_the_batch_call() -> None:
    texts = TEXTS[:600]
    batch = compute_score_batch(["src"] * len(texts), texts, [TRUTH] * len(texts), reward="step")
    for text, row in zip(texts, batch, strict=True):
        one = compute_score("src", text, TRUTH, reward="step")
        assert one == pytest.approx(row, rel=1e-12), text


def test_scalar_rewards_match_core_exactly() -> None:
    rng = np.random.default_rng(3)
    knots = [*core.STEP_THRESHOLDS_KM, *core.PIECEWISE_KNOTS_KM, *ACC_THRESHOLDS_KM]
    ds = [0.0, *knots, *(np.nextafter(k, 0.0) for k in knots), *(np.nextafter(k, 1e9) for k in knots)]
    ds += list(rng.uniform(0, 1000, 3000)) + list(10 ** rng.uniform(-3, 4.3, 3000))
    for d in map(float, ds):
        assert _step_one(d) == core.step_reward(d), d
        assert _piecewise_one(d) == core.piecewise_linear_reward(d), d


def test_distances_at_thresholds_follow_numpy() -> None:
    rng = np.random.default_rng(11)
    for t in ACC_THRESHOLDS_KM:
        for _ in range(40):
            lat, lon = float(rng.uniform(-80, 80)), float(rng.uniform(-180, 180))
            plat, plon = (float(x) for x in destination(lat, lon, float(rng.uniform(0, 360)), t))
            want = float(haversine_km(plat, plon, lat, lon))
            assert _distance_one(plat, plon, lat, lon) == want
    for _ in range(2000):
        lat1, lat2 = rng.uniform(-90, 90, 2)
        lon1, lon2 = rng.uniform(-180, 180, 2)
        d = _distance_one(float(lat1), float(lon1), float(lat2), float(lon2))
        assert d == pytest.approx(float(haversine_km(lat1, lon1, lat2, lon2)), rel=1e-13)


def test_config_errors_still_raise_on_the_single_path() -> None:
    with pytest.raises(ValueError, match="tau_km"):
        compute_score("src", "no answer", TRUTH, reward="spatial", reward_params={"tau_km": 0})
    with pytest.raises(ValueError, match="unknown reward"):
        compute_score("src", "x", TRUTH, reward="fancy")
    with pytest.raises(ValueError, match="ground truth"):
        compute_score("src", '<answer>{"lat": 1, "lon": 2}</answer>', {"city": "Paris"})
    miss = compute_score("src", "", TRUTH, reward={"name": "spatial", "tau_km": 50})
    assert miss["score"] == 0.0 and miss["parsed"] == 0.0 and math.isclose(miss["distance_km"], 20015.1)
