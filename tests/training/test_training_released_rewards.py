"""``released=true`` equals the authors' released reward on every case family; the paper modes
read the answer shapes the released code credits, with each deliberate difference pinned here.

Expected values are derived by hand from the released code (read with the search tool, not
vendored): Thinking with Map ``verl/verl/utils/reward_score/localization.py``
(``compute_distance_score``), GeoVista ``verl/utils/reward_score/search_agent.py`` with
``utils_geo.eval_geolocation_response`` (rule path), GeoAgent ``swift/plugin/orm.py``
(``GeoScoreAccuracy``, ``TripleFieldAccuracy``). The Thinking-with-Map oracle below follows the
released function line by line and measures with geopy itself, the library it calls.
"""

from __future__ import annotations

import json
import math
import random
import re
import sys
from pathlib import Path

import pytest
from geopy.distance import geodesic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geosleuth.core import released as rel
from geosleuth.training.rewards.batch import geoagent_levels, score_texts

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the released transcriptions
from released_geoagent import three_fields
from released_twm import step_score  # noqa: E402

EIFFEL = {
    "lat": 48.8584,
    "lon": 2.2945,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}


def _obj(lat: object, lon: object, city: str = "Paris", country: str = "France") -> str:
    return json.dumps({"lat": lat, "lon": lon, "city": city, "country": country})


def _step(text: str, truth: dict = EIFFEL, released: bool = True) -> float:
    return float(score_texts(f"step:released={str(released).lower()}", [text], [truth]).scores[0])


# --- Thinking with Map: compute_distance_score ----------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_obj(48.8584, 2.2945), 1.0),
        (_obj("48.8584", "2.2945"), 1.0),  # geopy's float() takes numeric strings
        (_obj(48.8584, 362.2945), 1.0),  # geopy wraps the longitude
        (_obj(91.0, 2.2945), 0.0),  # |lat| > 90: geopy raises, the released code scores 0
        (_obj(None, 2.2945), 0.0),
        (_obj("", 2.2945), 0.0),  # "" or 0.0 -> latitude 0: ~5,430 km away
        (_obj("48.8584N", 2.2945), 0.0),  # float() fails
        ('{"note": "a } here", "lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"}', 0.0),
        ('{"final_answer": ' + _obj(48.8584, 2.2945) + "}", 0.0),  # only top-level objects
        ('{"lat": 48.8584, "lon": 2.2945, "city": "Paris"}', 0.0),  # country missing
        ("The Eiffel Tower, 48.8584 N 2.2945 E.", 0.0),  # prose: no JSON, no score
        ("", 0.0),
        # the first complete object wins, even a tool's and even when a later one is the model's
        (
            "<tool_response>"
            + _obj(48.8584, 2.2945)
            + "</tool_response><answer>"
            + _obj(40.4168, -3.7038)
            + "</answer>",
            1.0,
        ),
        ("<answer>" + _obj(40.4168, -3.7038) + "</answer> then " + _obj(48.8584, 2.2945), 0.0),
        ("{ unclosed " + _obj(48.8584, 2.2945), 0.0),  # one object that never closes
    ],
)
def test_step_released_equals_compute_distance_score(text: str, expected: float) -> None:
    assert _step(text) == expected


@pytest.mark.parametrize(
    ("km", "expected"),
    [(0.4999, 1.0), (0.5001, 0.8), (1.999, 0.8), (2.001, 0.6), (9.99, 0.6), (10.01, 0.4)]
    + [(24.99, 0.4), (25.01, 0.2), (199.9, 0.2), (200.1, 0.1), (749.9, 0.1), (750.1, 0.0)],
)
def test_step_released_bins_the_wgs84_geodesic_in_metres(km: float, expected: float) -> None:
    p = geodesic(kilometers=km).destination((EIFFEL["lat"], EIFFEL["lon"]), 37.0)
    assert _step(_obj(p.latitude, p.longitude)) == expected


def _oracle_step(text: str, truth: dict) -> float:
    """``compute_distance_score`` as released (the one transcription, tests/released_twm.py)."""
    return step_score(text, truth)


_PIECES = [
    lambda r: _obj(round(r.uniform(-89, 89), 4), round(r.uniform(-179, 179), 4)),
    lambda r: _obj(
        round(EIFFEL["lat"] + r.uniform(-0.05, 0.05), 5), round(EIFFEL["lon"] + r.uniform(-0.05, 0.05), 5)
    ),
    lambda r: _obj(str(round(r.uniform(40, 50), 3)), round(r.uniform(0, 5), 3)),
    lambda r: _obj(round(r.uniform(-89, 89), 3), round(r.uniform(181, 540), 3)),
    lambda r: _obj(round(r.uniform(90.5, 200), 3), 2.0),
    lambda r: '{"lat": 48.85, "lon": 2.29, "city": "P"}',
    lambda r: '{"note": "a { brace", "lat": 1}',
    lambda r: '{"answer": ' + _obj(48.85, 2.29) + "}",
    lambda r: (
        "<tool_response>"
        + _obj(round(r.uniform(-60, 60), 3), round(r.uniform(-60, 60), 3))
        + "</tool_response>"
    ),
    lambda r: "Thinking about the signs } and { the road. ",
    lambda r: '<tool_call>{"name": "poi_keyword_search", "arguments": {"query": "tower"}}</tool_call>',
    lambda r: "<answer>",
    lambda r: "</answer>\n",
    lambda r: '{"lat": NaN, "lon": 2, "city": "x", "country": "y"}',
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_step_released_agrees_with_the_released_function_on_generated_rollouts(seed: int) -> None:
    r = random.Random(seed)
    text = "".join(r.choice(_PIECES)(r) for _ in range(r.randint(0, 5)))
    truth = {"lat": r.uniform(-80, 80), "lon": r.uniform(-179, 179)}
    assert _step(text, truth) == _oracle_step(text, truth)


def test_step_paper_reads_the_models_own_last_answer() -> None:
    """The deliberate difference: paper mode never reads a tool's JSON as the answer."""
    text = (
        "<tool_response>"
        + _obj(48.8584, 2.2945)
        + "</tool_response><answer>"
        + _obj(40.4168, -3.7038)
        + "</answer>"
    )
    assert _step(text, released=False) == 0.0  # Madrid, ~1,050 km
    assert _step(text, released=True) == 1.0


def test_released_readers_are_linear_on_hostile_text() -> None:
    hostile = "{" * 300_000 + "<answer>" + " " * 300_000
    assert rel.twm_answer(hostile) is None
    assert rel.geoagent_first_answer(hostile) is None
    assert rel.geoagent_final_answer_json(hostile) is None


# --- GeoVista: compure_score_search, rule path -----------------------------------------------

JUAN_GRIEGO = {
    "lat": 11.08,
    "lon": -63.96,
    "levels": {"country": "Venezuela", "admin1": "Nueva Esparta", "city": "Juan Griego"},
}
HOUSTON = {
    "lat": 29.76,
    "lon": -95.37,
    "levels": {"country": "United States", "admin1": "Texas", "city": "Houston"},
}
CAPE_TOWN = {
    "lat": -33.92,
    "lon": 18.42,
    "levels": {"country": "South Africa", "admin1": "Western Cape", "city": "Cape Town"},
}
SALVADOR = {
    "lat": -12.97,
    "lon": -38.50,
    "levels": {"country": "Brazil", "admin1": "Bahia", "city": "Salvador"},
}
VILANOVA = {
    "lat": 41.22,
    "lon": 1.72,
    "levels": {"country": "Spain", "admin1": "Catalonia", "city": "Vilanova i la Geltrú"},
}


def _hier(text: str, truth: dict, released: bool) -> float:
    spec = {"name": "hierarchical", "released": released, "similarity": "string"}
    return float(score_texts(spec, [text], [truth]).scores[0])


@pytest.mark.parametrize(
    ("text", "truth", "expected"),
    [
        ("this is Juan Griego (Nueva Esparta, Venezuela)", JUAN_GRIEGO, 4.0),
        ("<answer>Juan Griego (Nueva Esparta, Venezuela)</answer>", JUAN_GRIEGO, 4.0),
        ("<answer>Houston (Texas, United States)</answer>", HOUSTON, 4.0),
        ("houston, texas, united states", HOUSTON, 4.0),
        ("<answer>\nCountry: united states\nProvince/State: texas\nCity: houston\n</answer>", HOUSTON, 4.0),
        ("<answer>Cape Town, WE, South Africa</answer>", CAPE_TOWN, 4.0),
        ("Cape Town, WE, South Africa", CAPE_TOWN, 4.0),
        ("<answer>Vilanova i la Geltrú, Catalonia, Spain</answer>", VILANOVA, 4.0),
        ("<answer>Vilanova i la Geltru, Barcelona, Spain</answer>", VILANOVA, 4.0),
        ("<answer>Sitges, Catalonia, Spain</answer>", VILANOVA, 2.0),
        (
            "<answer>Salvador (Nueva Esparta, Venezuela)</answer>",
            SALVADOR,
            4.0,
        ),  # a city named like a country
        ("<answer>Dallas, Texas, USA</answer>", HOUSTON, 2.0),
        ("<answer>Madrid, Spain</answer>", VILANOVA, 1.0),
        ("<answer>Lisbon, Portugal</answer>", VILANOVA, 0.0),
        ("", HOUSTON, 0.0),
    ],
)
def test_hierarchical_paper_and_released_score_every_answer_shape(
    text: str, truth: dict, expected: float
) -> None:
    assert _hier(text, truth, released=True) == expected
    assert _hier(text, truth, released=False) == expected


@pytest.mark.parametrize(
    ("text", "truth", "paper", "released"),
    [
        # released reads the whole last turn: a city named only in the reasoning earns β²
        ("<think>Maybe Houston?</think><answer>Dallas, Texas, United States</answer>", HOUSTON, 2.0, 4.0),
        # released splits at any "assistant": prose after the answer hides it
        ("<answer>Houston, Texas, United States</answer> as your assistant I am sure", HOUSTON, 4.0, 0.0),
        # a state and a city of the same name: released credits the city from the state line
        (
            "<answer>\nCountry: Switzerland\nProvince/State: Lucerne\nCity: Emmen\n</answer>",
            {
                "lat": 47.05,
                "lon": 8.31,
                "levels": {"country": "Switzerland", "admin1": "Lucerne", "city": "Lucerne"},
            },
            2.0,
            4.0,
        ),
    ],
)
def test_hierarchical_documented_differences(text: str, truth: dict, paper: float, released: float) -> None:
    assert _hier(text, truth, released=False) == paper
    assert _hier(text, truth, released=True) == released


def test_hierarchical_paper_reads_other_languages() -> None:
    """Multilingual names (paper mode, default similarity): the released ASCII rule cannot."""
    truth = {
        "lat": 52.52,
        "lon": 13.40,
        "levels": {"country": "Germany", "admin1": "Berlin", "city": "Berlin"},
    }
    text = "<answer>Country: Deutschland</answer>"
    assert float(score_texts("hierarchical", [text], [truth]).scores[0]) == 1.0
    assert _hier(text, truth, released=True) == 0.0


_CITIES = [
    ("United States", "Texas", "Houston"),
    ("Venezuela", "Nueva Esparta", "Juan Griego"),
    ("Spain", "Catalonia", "Vilanova i la Geltrú"),
    ("South Africa", "Western Cape", "Cape Town"),
    ("Japan", "Osaka", "Sakai"),
    ("Brazil", "Bahia", "Salvador"),
]
_SHAPES = [
    lambda c, s, y: f"<answer>\nCountry: {c}\nProvince/State: {s}\nCity: {y}\n</answer>",
    lambda c, s, y: f"<answer>{y}, {s}, {c}</answer>",
    lambda c, s, y: f"<answer>{y} ({s}, {c})</answer>",
    lambda c, s, y: f"this is {y} ({s}, {c})",
    lambda c, s, y: f"{y}, {s}, {c}".lower(),
    lambda c, s, y: f"<answer>{y.upper()}, {c}</answer>",
    lambda c, s, y: f"<answer>{s}, {c}</answer>",
    lambda c, s, y: f"<answer>{c}</answer>",
    lambda c, s, y: f"<answer>I believe this is {y}.</answer>",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1))
def test_hierarchical_paper_agrees_with_released_on_final_answers(seed: int) -> None:
    """Answers that name places only in the final answer (no reasoning mentions, no
    "assistant"): the paper mode and the released rule agree exactly."""
    r = random.Random(seed)
    truth_row = r.choice(_CITIES)
    answer_row = [r.choice(_CITIES)[k] if r.random() < 0.4 else truth_row[k] for k in range(3)]
    text = r.choice(_SHAPES)(*answer_row)
    truth = {
        "lat": 0.0,
        "lon": 0.0,
        "levels": dict(zip(("country", "admin1", "city"), truth_row, strict=True)),
    }
    assert _hier(text, truth, released=False) == _hier(text, truth, released=True)


# --- GeoAgent ----------------------------------------------------------------------------------


def test_geoagent_radius_is_6371() -> None:
    """Paper Table 5 and ``_calculate_distance`` use R = 6371 km: at the 2,000 km cut-off the
    radius decides (an answer 1999.999 km away on R = 6371 is 2000.001 km on R = 6371.0088)."""
    lat = 48.8584 - math.degrees(1999.999 / 6371.0)
    text = json.dumps({"lat": lat, "lon": 2.2945})
    out = score_texts("spatial:max_km=2000", [f"<answer>{text}</answer>"], [EIFFEL]).item_info(0)
    assert out["distance_km"] == pytest.approx(1999.999, abs=1e-6)
    assert out["score"] == pytest.approx(math.exp(-1999.999 / 200))
    assert rel.geoagent_haversine_km(lat, 2.2945, 48.8584, 2.2945) == pytest.approx(1999.999, abs=1e-6)


def test_geoagent_released_semantic_joins_with_semicolon_and_drops_empty_parts() -> None:
    seen: list[tuple[str, str]] = []

    def sim(p: str, r: str, level: str) -> float:
        seen.append((level, p))
        return 1.0

    text = "<answer>France;Île-de-France;Paris; 7e arrondissement</answer>"
    score_texts({"name": "semantic", "released": True, "similarity": sim}, [text], [EIFFEL])
    assert ("precise", "Paris;7e arrondissement") in seen
    seen.clear()
    score_texts(
        {"name": "semantic", "released": True, "similarity": sim},
        ["<answer>France;;Paris</answer>"],
        [EIFFEL],
    )
    assert ("region", "Paris") in seen  # released: empty parts are dropped before the split
    assert rel.geoagent_fields("France;;Paris") == ("France", "Paris", "")
    assert geoagent_levels("<answer>France;;Paris</answer>") == {
        "country": "France",
        "region": None,
        "precise": "Paris",
    }


def test_geoagent_json_final_answer_is_geocoded() -> None:
    tagged = score_texts("spatial", ["<answer>France; Île-de-France; Paris</answer>"], [EIFFEL]).item_info(0)
    sft = json.dumps({"CountryIdentification": "...", "FinalAnswer": "France; Île-de-France; Paris"})
    for reward in ("spatial", "spatial:released=true"):
        out = score_texts(reward, [sft], [EIFFEL]).item_info(0)
        assert out["distance_km"] == pytest.approx(tagged["distance_km"])
        assert out["score"] > 0.9
    assert geoagent_levels(sft) == {"country": "France", "region": "Île-de-France", "precise": "Paris"}


def test_geoagent_untagged_answer_drops_its_label() -> None:
    text = "The signs are French.\nFinal answer: France; Île-de-France; Paris"
    assert geoagent_levels(text) == {"country": "France", "region": "Île-de-France", "precise": "Paris"}
    assert geoagent_levels("**Answer:** France; Île-de-France; Paris") == {
        "country": "France",
        "region": "Île-de-France",
        "precise": "Paris",
    }
    assert geoagent_levels("It rained; we waited for hours under the awning of the station.") is None


def test_geoagent_country_first_comma_answer_reads_coarse_to_fine() -> None:
    assert geoagent_levels("<answer>United States, Virginia, Montrose</answer>") == {
        "country": "United States",
        "region": "Virginia",
        "precise": "Montrose",
    }
    assert geoagent_levels("<answer>Montrose, Virginia, United States</answer>") is None  # the parser's order


@pytest.mark.parametrize(
    "text",
    [
        "<answer>France; Île-de-France; Paris</answer>",
        json.dumps({"CountryIdentification": "...", "FinalAnswer": "France; Île-de-France; Paris"}),
        "The signs are French.\nFinal answer: France; Île-de-France; Paris",
        "<answer>France, Île-de-France, Paris</answer>",
    ],
    ids=["tagged", "json-final-answer", "untagged-labelled", "country-first-commas"],
)
def test_a_perfect_geoagent_answer_in_every_shape_gets_full_reward(text: str) -> None:
    """Contract for the paper modes: each shape GeoAgent's answers take scores R_sem = 1 and the
    full R_spa of the geocoded place."""
    assert score_texts("semantic", [text], [EIFFEL]).scores[0] == pytest.approx(1.0)
    assert score_texts("spatial", [text], [EIFFEL]).scores[0] > 0.9


def test_verl_entry_points_take_released_step() -> None:
    """verl's ``compute_score`` / ``compute_score_batch`` (what the naive manager and geosleuth's
    reward manager call) reach the released step reward through ``reward_params``."""
    from geosleuth.training.verl.reward import compute_score, compute_score_batch

    decoy = (
        "<tool_response>"
        + _obj(48.8584, 2.2945)
        + "</tool_response><answer>"
        + _obj(40.4168, -3.7038)
        + "</answer>"
    )
    one = compute_score("imageo", decoy, EIFFEL, reward="step", reward_params={"released": True})
    assert one["score"] == 1.0 and one["parsed"] == 1.0
    assert compute_score("imageo", decoy, EIFFEL, reward="step")["score"] == 0.0
    batch = compute_score_batch(["imageo"] * 2, [decoy, ""], [EIFFEL] * 2, reward="step:released=true")
    assert [b["score"] for b in batch] == [1.0, 0.0]


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "France",
                " Île-de-France ",
                "Paris",
                "",
                ";",
                "；",
                "<answer>",
                "</answer>",
                "<ANSWER>",
                "\n",
                "x y",
            ]
        ),
        max_size=12,
    )
)
def test_released_semantic_reads_fields_as_released(pieces: list[str]) -> None:
    """Every field the released R_sem compares, on generated completions, is the released one."""
    text = "".join(pieces)
    seen: dict[str, str] = {}

    def sim(p: str, r: str, level: str) -> float:
        seen[level] = p
        return 1.0

    score_texts({"name": "semantic", "released": True, "similarity": sim}, [text], [EIFFEL])
    want = three_fields(text)
    for level, field in zip(("country", "region", "precise"), want, strict=True):
        assert seen.get(level, "") == field


def test_hierarchical_verifier_released_falls_back_to_the_rule() -> None:
    """``eval_geolocation_response``: the verifier's verdict replaces the rule; when the call
    fails, the released code keeps the rule's result (the paper mode scores the failure 0)."""
    calls: list[str] = []

    def verdict(answer: str, levels: dict) -> dict:
        calls.append(answer)
        return {"country": True, "state": False, "city": False}

    def broken(answer: str, levels: dict) -> dict:
        raise TimeoutError("judge down")

    text = "<think>hmm</think><answer>Houston, Texas, United States</answer>"
    for released in (True, False):
        spec = {"name": "hierarchical", "released": released, "verifier": verdict}
        assert score_texts(spec, [text], [HOUSTON]).scores[0] == 1.0  # the verdict, not the rule's 4
    assert calls[0].startswith("<think>hmm") and calls[1] == "Houston, Texas, United States"
    assert (
        score_texts({"name": "hierarchical", "released": True, "verifier": broken}, [text], [HOUSTON]).scores[
            0
        ]
        == 4.0
    )
    assert score_texts({"name": "hierarchical", "verifier": broken}, [text], [HOUSTON]).scores[0] == 0.0


class _RecordingGeocoder:
    def __init__(self) -> None:
        self.queries: list[list[str | None]] = []

    def geocode_many(self, answers: list[list[str | None]]) -> list[tuple[float, float] | None]:
        self.queries.extend(answers)
        return [(48.8566, 2.3522) for _ in answers]


def _oracle_spatial_answer(completion: str) -> str | None:
    """``GeoScoreAccuracy._extract_answer_content`` as released."""
    m = re.search(r"<answer>\s*(.*?)\s*</answer>", completion, flags=re.S | re.I)
    if m:
        return m.group(1).strip()
    try:
        jm = re.search(r"\{.*\}", completion, flags=re.S)
        if jm:
            data = json.loads(jm.group(0))
            if "FinalAnswer" in data:
                return str(data["FinalAnswer"]).strip()
    except (json.JSONDecodeError, KeyError, TypeError):
        pass
    return None


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "France",
                "; Paris",
                "<answer>",
                "</answer>",
                '{"FinalAnswer": "France; Lyon"}',
                "{",
                "}",
                " ",
                "\n",
            ]
        ),
        max_size=10,
    )
)
def test_released_spatial_geocodes_what_the_released_code_sends(pieces: list[str]) -> None:
    text = "".join(pieces)
    geocoder = _RecordingGeocoder()
    from geosleuth.training.rewards import geocoding

    previous = geocoding._GEOCODERS.get("")
    geocoding._GEOCODERS[""] = geocoder  # type: ignore[assignment]
    try:
        out = score_texts("spatial:released=true", [text], [EIFFEL]).item_info(0)
    finally:
        if previous is None:
            geocoding._GEOCODERS.pop("", None)
        else:
            geocoding._GEOCODERS[""] = previous
    answer = _oracle_spatial_answer(text)
    if not answer or not answer.strip(";； \n"):
        assert geocoder.queries == [] and out["score"] == 0.0
    else:
        fields = [p.strip() for p in re.split(r"[;；]", answer) if p.strip()]
        assert [q for q in geocoder.queries[0] if q] == (
            fields[:2] + [";".join(fields[2:])] if len(fields) > 2 else fields
        )
        assert out["score"] > 0.0
