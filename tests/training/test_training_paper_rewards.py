"""Each named reward equals its paper (and, by option, the authors' released code), in every
answer format the project's prompts produce. Expected values are worked out by hand from the
formulas quoted in each test; distances by the haversine formula written out here.

Depends on: the offline gazetteer (geocoding "France; Île-de-France; Paris"); the multilingual
region test (山东 / Shandong) needs admin-1 names in local scripts in the gazetteer (issue 10
item 4) and skips with that reason until they are there.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import types
from typing import Any

import pytest

from geosleuth.agent.prompting import build_prompts, load_style
from geosleuth.core import reward_math as core
from geosleuth.core.records import Task
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply
from geosleuth.training.rewards.batch import _piecewise_one, geoagent_levels, score_texts
from geosleuth.training.rewards.consistency import ConsistencyJudge, JudgeConfig
from geosleuth.training.verl.reward import compute_score

PARIS = (48.85341, 2.3488)  # the offline gazetteer's Paris (GeoNames 2988507)
TRUTH = {
    "lat": PARIS[0],
    "lon": PARIS[1],
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}
EIFFEL = {"lat": 48.8584, "lon": 2.2945, "levels": TRUTH["levels"]}


def haversine(a: tuple[float, float], b: tuple[float, float], radius_km: float = 6371.0) -> float:
    """GeoAgent's haversine: R = 6371 km (paper Table 5, ``GeoScoreAccuracy._calculate_distance``)."""
    la1, lo1, la2, lo2 = map(math.radians, (*a, *b))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 2 * radius_km * math.asin(math.sqrt(h))


def sigma(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


def geovista_answer(country: str, state: str, city: str, lat: float, lon: float) -> str:
    """The answer block exactly as the project's geovista prompt asks for it."""
    system = load_style("geovista").system
    template = system[system.rindex("<answer>") : system.rindex("</answer>") + len("</answer>")]
    filled = (
        template.replace("<country>", country)
        .replace("<province or state>", state)
        .replace("<city>", city)
        .replace("<decimal degrees>", f"{lat}", 1)
        .replace("<decimal degrees>", f"{lon}", 1)
    )
    assert "Province/State: " + state in filled
    return "<think>Swiss German signs and a lake.</think>\n" + filled


LUCERNE = {
    "lat": 47.0502,
    "lon": 8.3093,
    "levels": {"country": "Switzerland", "admin1": "Lucerne", "city": "Lucerne"},
}


# --- GeoVista: 4 (β²) if the city is right, else 2 (β) if the state is, else 1 if the country is


@pytest.mark.parametrize(
    ("country", "state", "city", "expected"),
    [
        ("Switzerland", "Lucerne", "Lucerne", 4.0),  # perfect answer: β² = 4
        ("Switzerland", "Zurich", "Lucerne", 4.0),  # each level on its own: the right city is β²
        ("Switzerland", "Lucerne", "Emmen", 2.0),  # state right, city wrong: β
        ("Switzerland", "Zurich", "Zurich", 1.0),  # country only: 1
        ("Austria", "Tyrol", "Innsbruck", 0.0),
    ],
)
def test_geovista_hierarchical_in_the_geovista_format(
    country: str, state: str, city: str, expected: float
) -> None:
    text = geovista_answer(country, state, city, 47.05, 8.31)
    assert compute_score("geovista", text, LUCERNE, reward="hierarchical")["score"] == expected
    assert (
        compute_score("geovista", text, LUCERNE, reward="hierarchical:beta=3")["score"]
        == {
            4.0: 9.0,
            2.0: 3.0,
            1.0: 1.0,
            0.0: 0.0,
        }[expected]
    )
    norm = compute_score("geovista", text, LUCERNE, reward={"name": "hierarchical", "normalize": True})
    assert norm["score"] == expected / 4.0


UK_NATIONS = {
    "England": ("London", 51.5074, -0.1278),
    "Scotland": ("Glasgow", 55.8642, -4.2518),
    "Wales": ("Cardiff", 51.4816, -3.1791),
    "Northern Ireland": ("Belfast", 54.5973, -5.9301),
}


@pytest.mark.parametrize(
    ("truth_nation", "answer_nation"), [(a, b) for a in UK_NATIONS for b in UK_NATIONS if a != b]
)
def test_geovista_a_uk_nation_for_another_is_country_credit_only(
    truth_nation: str, answer_nation: str
) -> None:
    """The released rule (``rule_based`` in GeoVista's utils_geo.py) credits the state only when
    its name occurs as a whole term: "Glasgow, Scotland, United Kingdom" against London, England
    names the country alone, 1 (not β = 2), though both nations are also aliases of the UK."""
    city, lat, lon = UK_NATIONS[truth_nation]
    truth = {
        "lat": lat,
        "lon": lon,
        "levels": {"country": "United Kingdom", "admin1": truth_nation, "city": city},
    }
    answer_city, alat, alon = UK_NATIONS[answer_nation]
    text = geovista_answer("United Kingdom", answer_nation, answer_city, alat, alon)
    assert compute_score("geovista", text, truth, reward="hierarchical")["score"] == 1.0
    released = {"name": "hierarchical", "released": True}
    assert compute_score("geovista", text, truth, reward=released)["score"] == 1.0
    right = geovista_answer("United Kingdom", truth_nation, answer_city, alat, alon)
    assert compute_score("geovista", right, truth, reward="hierarchical")["score"] == 2.0  # the state: β


def test_geovista_verifier_verdict_replaces_the_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, dict[str, str]]] = []

    def verdict(answer: str, truth: dict[str, str]) -> dict[str, bool]:
        seen.append((answer, truth))
        return {"country": True, "state": True, "city": False}

    module = types.ModuleType("fake_geovista_verifier")
    module.verdict = verdict  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_geovista_verifier", module)
    text = geovista_answer("Switzerland", "Lucerne", "Lucerne", 47.05, 8.31)
    spec = {"name": "hierarchical", "verifier": "fake_geovista_verifier:verdict"}
    assert (
        compute_score("x", text, LUCERNE, reward=spec)["score"] == 2.0
    )  # the verifier says: state, not city
    assert "Province/State: Lucerne" in seen[0][0] and seen[0][1]["city"] == "Lucerne"
    # the verifier never sees tool output
    hidden = text.replace("<think>", "<tool_response><answer>City: Bern</answer></tool_response><think>")
    compute_score("x", hidden, LUCERNE, reward=spec)
    assert "Bern" not in seen[-1][0]


# --- SpotAgent: 1 (<1 km), 1 -> 0.75 (1–25 km), 0.75 -> 0.2 (25–200 km), 0 from 200 km on


@pytest.mark.parametrize(
    ("d", "expected"),
    [(0.5, 1.0), (1.0, 1.0), (13.0, 1.0 - 0.25 * 12 / 24), (25.0, 0.75), (100.0, 0.75 - 0.55 * 75 / 175)]
    + [(199.999, 0.75 - 0.55 * 174.999 / 175), (200.0, 0.0), (750.0, 0.0)],
)
def test_spotagent_piecewise(d: float, expected: float) -> None:
    assert core.piecewise_linear_reward(d) == pytest.approx(expected)
    assert _piecewise_one(d) == pytest.approx(expected)


# --- GeoAgent R_spa = exp(−d/τ), τ = 200 km, text answers geocoded


def test_geoagent_spatial_geocodes_the_text_answer() -> None:
    text = "<think>...</think><answer>France; Île-de-France; Paris</answer>"
    d = haversine(PARIS, (EIFFEL["lat"], EIFFEL["lon"]))  # geocoded to the gazetteer's Paris
    out = compute_score("x", text, EIFFEL, reward="spatial")
    assert out["distance_km"] == pytest.approx(d, rel=1e-6)
    assert out["score"] == pytest.approx(math.exp(-d / 200))
    assert out["parsed"] == 1.0
    full = "；".join(["France", "Île-de-France", "Paris"])  # full-width separators
    assert compute_score("x", f"<answer>{full}</answer>", EIFFEL, reward="spatial")["score"] == pytest.approx(
        math.exp(-d / 200)
    )
    assert compute_score("x", text, EIFFEL, reward={"name": "spatial", "geocode": False})["score"] == 0.0


def test_geoagent_spatial_released_cutoff_and_failed_geocode(caplog: pytest.LogCaptureFixture) -> None:
    far = "<answer>Lisbon; Portugal</answer>"
    assert geoagent_levels(far) == {"country": "Lisbon", "region": "Portugal", "precise": None}
    text = '<answer>{"lat": 30.0, "lon": 2.3488}</answer>'
    d = haversine((30.0, 2.3488), PARIS)  # ≈ 2096 km
    assert d > 2000
    assert compute_score("x", text, TRUTH, reward="spatial")["score"] == pytest.approx(math.exp(-d / 200))
    assert compute_score("x", text, TRUTH, reward="spatial:max_km=2000")["score"] == 0.0  # 0 from 2000 km
    # released: the answer text is geocoded (the released code reads no coordinates); Cairo is
    # about 3,200 km from Paris, so the paper's exp(−d/200) is small but positive and released 0
    cairo = "<answer>Egypt; Cairo Governorate; Cairo</answer>"
    paper = compute_score("x", cairo, TRUTH, reward="spatial")
    assert paper["distance_km"] > 2000 and paper["score"] > 0.0
    assert compute_score("x", cairo, TRUTH, reward="spatial:released=true")["score"] == 0.0
    with caplog.at_level(logging.WARNING):
        out = compute_score(
            "x", "<answer>Narnia; Cair Paravel; Lantern Waste</answer>", TRUTH, reward="spatial"
        )
    assert out["score"] == 0.0 and out["distance_km"] > 20000
    assert "could not be geocoded" in caplog.text


# --- GeoAgent R_sem = Σ αᵢ·sᵢ, α = 0.1/0.6/0.3, thresholds 0.7/0.5


def _plug(monkeypatch: pytest.MonkeyPatch, values: dict[str, float]) -> str:
    module = types.ModuleType("fake_similarity")
    module.sim = lambda p, r, level: values[level]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_similarity", module)
    return "fake_similarity:sim"


@pytest.mark.parametrize(
    ("values", "paper", "released"),
    [
        ({"country": 0.69, "region": 1.0, "precise": 1.0}, 0.0, 0.1 * 0.69),  # 0.69 adds 0, not 0.069
        ({"country": 0.7, "region": 0.49, "precise": 1.0}, 0.1 * 0.7, 0.1 * 0.7 + 0.6 * 0.49),
        ({"country": 0.9, "region": 0.5, "precise": 0.2}, 0.1 * 0.9 + 0.6 * 0.5 + 0.3 * 0.2, None),
        ({"country": 1.0, "region": 1.0, "precise": 1.0}, 1.0, 1.0),
    ],
)
def test_semantic_gating(
    monkeypatch: pytest.MonkeyPatch, values: dict[str, float], paper: float, released: float | None
) -> None:
    path = _plug(monkeypatch, values)
    text = "<answer>France; Île-de-France; Paris</answer>"
    got = compute_score("x", text, TRUTH, reward={"name": "semantic", "similarity": path})["score"]
    assert got == pytest.approx(paper)
    rel = compute_score("x", text, TRUTH, reward={"name": "semantic", "similarity": path, "released": True})
    assert rel["score"] == pytest.approx(paper if released is None else released)


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("France; Île-de-France; Paris", 1.0),
        ("France；Île-de-France；Paris", 1.0),  # full-width separators
        (
            "France; Ile de France; Paris; 7th arrondissement",
            1.0,
        ),  # 4 parts: the rest is the place (names Paris)
        ("France; ; Paris", 0.1),  # empty region: the gate closes after the country
        ("France; Île-de-France", 0.7),  # no place
        ("; Île-de-France; Paris", 0.0),  # no country
        ("Deutschland; Bayern; München", 0.0),
    ],
)
def test_semantic_answer_forms(answer: str, expected: float) -> None:
    got = compute_score("x", f"<answer>{answer}</answer>", TRUTH, reward="semantic")["score"]
    assert got == pytest.approx(expected)


def test_semantic_four_parts_with_string_similarity() -> None:
    text = "<answer>France; Ile de France; Paris; 7th arrondissement</answer>"
    got = compute_score("x", text, TRUTH, reward={"name": "semantic", "similarity": "string"})["score"]
    # place "Paris; 7th arrondissement" contains "Paris": string similarity max(1/3, 0.8) = 0.8
    assert got == pytest.approx(0.1 * 1.0 + 0.6 * 1.0 + 0.3 * 0.8)


def test_semantic_is_multilingual() -> None:
    from geosleuth.gazetteer import get_gazetteer

    truth = {
        "lat": 36.06488,
        "lon": 120.38042,
        "levels": {"country": "China", "admin1": "Shandong", "city": "Qingdao"},
    }
    # country by alias (中国 = China), precise place by gazetteer identity (青岛 = Qingdao)
    no_region = compute_score("x", "<answer>中国; Shandong; 青岛</answer>", truth, reward="semantic")
    assert no_region["score"] == pytest.approx(1.0)
    if not get_gazetteer().search("山东", limit=1):
        pytest.skip(
            "the gazetteer has no admin-1 names in local scripts yet (issue 10 item 4): 山东 unresolved"
        )
    got = compute_score("x", "<answer>中国；山东；青岛</answer>", truth, reward="semantic")
    assert got["score"] == pytest.approx(1.0)


# --- round trip: the geoagent prompt's own format gets the perfect GeoAgent reward


def geoagent_rollout(country: str, region: str, place: str) -> str:
    system = load_style("geoagent").system
    for key in (
        "ChainOfThought",
        "CountryIdentification",
        "RegionalGuess",
        "PreciseLocalization",
        "FinalAnswer",
    ):
        assert key in system  # the prompt asks for exactly this structure
    why = "The clues visible in the photo, read one by one, leave only one answer at this stage. " * 3
    stages = zip(
        ("CountryIdentification", "RegionalGuess", "PreciseLocalization"),
        (country, region, place),
        strict=True,
    )
    chain = {
        "ChainOfThought": {
            s: {"Clues": ["c"], "Reasoning": why, "Conclusion": c, "Uncertainty": "low"} for s, c in stages
        },
        "FinalAnswer": f"{country}; {region}; {place}",
    }
    answer = f"<answer>{country}; {region}; {place}</answer>"
    return f"<think>{json.dumps(chain, ensure_ascii=False)}</think>\n{answer}"


def _judge_by_level(payload: dict[str, Any]) -> Any:
    prompt = payload["messages"][0]["content"]
    answer = "France" if "which country" in prompt else "Île-de-France" if "province" in prompt else "Paris"
    return reply(json.dumps({"answer": answer}))


def test_geoagent_prompt_round_trip_gets_the_perfect_reward() -> None:
    text = geoagent_rollout("France", "Île-de-France", "Paris")
    build_prompts(load_style("geoagent"), Task(id="a", image="x.jpg"), [], "text", "absolute", (10, 10))
    assert compute_score("x", text, TRUTH, reward="spatial")["score"] == pytest.approx(1.0)  # d = 0
    assert compute_score("x", text, TRUTH, reward="semantic")["score"] == pytest.approx(1.0)
    assert compute_score("x", text, TRUTH, reward="hierarchical")["score"] == 4.0
    with FakeOpenAIServer(_judge_by_level) as server:
        paper = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url))
        released = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url, released=True))
        best = score_texts("geo_similarity", [text], [TRUTH], paper.score_texts_sync).scores[0]
        best_released = score_texts("geo_similarity", [text], [TRUTH], released.score_texts_sync).scores[0]
    # reasoning of 255 characters per level: ℓ̂ = 1, p = σ(8·0.5) = σ(4) (paper); exactly 1 when released
    assert best == pytest.approx(1.5 * 1.0 + 1.0 * 1.0 + 0.5 * sigma(4))
    assert best_released == pytest.approx(3.0)
