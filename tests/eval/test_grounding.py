"""Grounding of the reasoning on trajectories built by hand, and GeoComp's macro recall / F1."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.grounding import Claim, Evidence, check_claims, sentence_citations
from geosleuth.core.metrics import macro_recall_f1
from geosleuth.core.parsing.coordinates import MAX_TEXT_PAIRS, coordinate_pairs
from geosleuth.core.records import Prediction, Sample, ToolCallRecord, Trajectory, Turn
from geosleuth.eval.report.grounding import (
    MAX_CLAIMS,
    geocomp_levels,
    grounding_block,
    place_claims,
    sample_grounding,
)
from geosleuth.eval.report.grounding_markup import grounding_context, grounding_markdown
from geosleuth.eval.report.markup import render
from geosleuth.eval.report.scores import score_run
from geosleuth.scoring.protocols import get_protocol
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply


def _trajectory(sid: str, tool: str, result: str, final: str, city: str, country: str) -> Trajectory:
    return Trajectory(
        sample_id=sid,
        model="m",
        turns=[
            Turn(index=0, text="Let me look.", tool_calls=[ToolCallRecord(name=tool, result_text=result)]),
            Turn(index=1, text=final),
        ],
        prediction=Prediction(city=city, country=country),
    )


# a: the search result names France and Paris, never Lyon; the reasoning says the search confirms Lyon
CITED_WRONGLY = _trajectory(
    "a",
    "web_search",
    "Top result: Paris is the capital of France.",
    "The signs suggest France. The search confirms Lyon. I estimate 45.76, 4.84.",
    "Lyon",
    "France",
)
# b: the geocoder returned Berlin at 52.52, 13.405; the reasoning cites it for Berlin and a point 0.34 km off
GROUNDED = _trajectory(
    "b",
    "geocode",
    "Berlin, Germany: lat 52.52, lon 13.405",
    "The geocoder places Berlin at 52.52, 13.40. Germany it is.",
    "Berlin",
    "Germany",
)


@pytest.fixture(scope="module")
def gazetteer():  # type: ignore[no-untyped-def]
    gazetteer_index = pytest.importorskip("geosleuth.gazetteer")
    return gazetteer_index.get_gazetteer()


def test_a_tool_cited_for_what_it_never_returned(gazetteer) -> None:  # type: ignore[no-untyped-def]
    a = sample_grounding(CITED_WRONGLY, gazetteer)
    got = {(c.claim.kind, c.claim.text, c.cited, c.supported) for c in a.checked}
    assert got == {
        ("country", "France", None, True),  # the search result names France
        ("place", "Lyon", "search", False),  # cited to the search, which never named Lyon
        ("coordinates", "45.76, 4.84", None, False),  # no result states a point near it
    }
    assert a.answer_place == "Lyon" and a.answer_mentioned is False
    b = sample_grounding(GROUNDED, gazetteer)
    assert {(c.claim.kind, c.cited, c.supported, c.by) for c in b.checked} == {
        ("place", "geocode", True, "geocode"),
        ("coordinates", "geocode", True, "geocode"),  # 0.34 km from the geocoder's 52.52, 13.405
        ("country", None, True, "geocode"),
    }
    assert b.answer_mentioned is True
    block = grounding_block([a, b])
    # 6 claims, 4 supported; places 1 of 2, countries 2 of 2, coordinates 1 of 2; cited 2 of 3;
    # answers: Lyon unmentioned, Berlin mentioned -> 1 of 2
    assert block["n_claims"] == 6 and block["claim_support_rate"] == pytest.approx(4 / 6, abs=1e-6)
    assert block["by_kind"] == {
        "place": {"n": 2, "support_rate": 0.5},
        "country": {"n": 2, "support_rate": 1.0},
        "coordinates": {"n": 2, "support_rate": 0.5},
    }
    assert block["n_cited"] == 3 and block["cited_support_rate"] == pytest.approx(2 / 3, abs=1e-6)
    assert block["unmentioned_answer_rate"] == 0.5 and block["samples_with_unsupported"] == 1
    assert block["unsupported"] == {
        "a": {
            "claims": [
                {"kind": "place", "text": "Lyon", "cited": "search"},
                {"kind": "coordinates", "text": "45.76, 4.84", "cited": None},
            ],
            "answer_place_unmentioned": "Lyon",
        }
    }
    text = "\n".join(grounding_markdown(block))
    assert "| a | place “Lyon” (cites search); coordinates “45.76, 4.84”; answer “Lyon” in no tool" in text
    assert "6 claims in 2 final reasonings (of 2 trajectories)" in text


def test_citation_needs_the_cited_tool() -> None:
    reasoning = "The map shows Lyon. Lyon is likely."
    claims = [Claim("place", "Lyon", ("Lyon",), start=14), Claim("place", "Lyon", ("Lyon",), start=20)]
    evidence = [Evidence("web_search", "Lyon is a city in France.")]
    checked = check_claims(reasoning, claims, evidence, [[]])
    # the first sentence cites the map (no map tool ran): unsupported; the second cites nothing and
    # the search result names Lyon: supported
    assert [(c.cited, c.supported) for c in checked] == [("map", False), (None, True)]
    assert sentence_citations("Search says X. Fine.") == [(0, 14, "search"), (14, 20, None)]


def test_coordinate_pairs() -> None:
    text = (
        "lat 45.764, lon 4.8357; I guess 48°51'N 2°21'E. In 2019 12 people. Also -33.86 151.2 and 95.5, 10.1"
    )
    assert [(lat, lon) for _, lat, lon in coordinate_pairs(text)] == [
        (45.764, 4.8357),
        (48.85, 2.35),
        (-33.86, 151.2),
    ]  # "2019 12" are two integers, not a position; 95.5 is no latitude


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789.,-°NSEW latlon\n ")), max_size=400))
def test_coordinate_pairs_any_text(text: str) -> None:
    pairs = coordinate_pairs(text)
    assert len(pairs) <= MAX_TEXT_PAIRS
    assert all(abs(lat) <= 90 and abs(lon) <= 180 and 0 <= at < len(text) for at, lat, lon in pairs)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=300))
def test_check_claims_any_reasoning(reasoning: str) -> None:
    claims = [Claim("place", "x", ("x",), start=i) for i in range(0, len(reasoning), 7)]
    checked = check_claims(reasoning, claims, [Evidence("web_search", reasoning)], [[]])
    assert len(checked) <= len(claims)


def test_macro_recall_f1_by_hand() -> None:
    # classes DE, FR, JP, none. FR: TP 1 of 2 true, 1 predicted -> recall 1/2, F1 2/3; DE: TP 1 of 1 true,
    # 2 predicted -> recall 1, F1 2/3; JP: recall 0, F1 0; none (never true): recall 0, F1 0
    recall, f1, classes = macro_recall_f1(["FR", "FR", "DE", "JP"], ["FR", "DE", "DE", "none"])
    assert classes == 4
    assert recall == pytest.approx((0.5 + 1 + 0 + 0) / 4)  # 0.375
    assert f1 == pytest.approx((2 / 3 + 2 / 3 + 0 + 0) / 4)  # 0.3333
    recall, f1, classes = macro_recall_f1([], [])
    assert math.isnan(recall) and classes == 0


def test_geocomp_levels() -> None:
    samples = [
        Sample(id="1", labels={"country": "FR", "city": "Paris"}),
        Sample(id="2", labels={"country": "DE", "city": "Berlin"}),
        Sample(id="3", labels={"country": "JP", "city": "Osaka"}),  # no record: no answer is read
    ]
    records = {
        "1": Trajectory(sample_id="1", model="m", prediction=Prediction(city="paris", country_code="FR")),
        "2": Trajectory(sample_id="2", model="m", prediction=Prediction(city="Munich", country_code="DE")),
    }
    levels = geocomp_levels(score_run(samples, records, get_protocol("default")))
    # country: FR, DE right, JP -> none: classes DE, FR, JP, none; recall (1 + 1 + 0 + 0) / 4 = 50 %,
    # F1 (1 + 1 + 0 + 0) / 4 = 50 %; accuracy 2 / 3
    assert levels["country"]["macro_recall"] == 50.0 and levels["country"]["macro_f1"] == 50.0
    assert levels["country"]["accuracy"] == pytest.approx(66.6667)
    # continent: Europe twice right, Asia -> none: classes Asia, Europe, none; recall (0 + 1 + 0) / 3,
    # F1: Europe 2*2 / (2 + 2) = 1 -> (0 + 1 + 0) / 3
    assert (
        levels["continent"]["macro_recall"] == pytest.approx(33.3333) and levels["continent"]["classes"] == 3
    )
    # city: paris right (folded), munich for berlin, none for osaka: classes berlin, munich, osaka, paris,
    # none
    # recall (0 + 0 + 0 + 1 + 0) / 5 = 20 %; F1 paris 1 -> 20 %
    assert levels["city"]["macro_recall"] == 20.0 and levels["city"]["macro_f1"] == 20.0


def _geoagent_rollout() -> str:
    why = "The clues visible in the photo, read one by one, leave only one answer at this stage. " * 3
    stages = zip(
        ("CountryIdentification", "RegionalGuess", "PreciseLocalization"),
        ("France", "Île-de-France", "Paris"),
        strict=True,
    )
    chain = {
        "ChainOfThought": {s: {"Clues": ["c"], "Reasoning": why, "Conclusion": c} for s, c in stages},
        "FinalAnswer": "France; Île-de-France; Paris",
    }
    answer = "<answer>France; Île-de-France; Paris</answer>"
    return f"<think>{json.dumps(chain, ensure_ascii=False)}</think>\n{answer}"


def _judge_by_level(payload: dict) -> object:
    prompt = payload["messages"][0]["content"]
    answer = "France" if "which country" in prompt else "Île-de-France" if "province" in prompt else "Paris"
    return reply(json.dumps({"answer": answer}))


def test_report_consistency_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = {
        "paris": {
            "lat": 48.8566,
            "lon": 2.3522,
            "country": "France",
            "city": "Paris",
            "raw": _geoagent_rollout(),
        },
        "berlin": {"lat": 52.52, "lon": 13.405, "country": "Germany"},
        "sydney": {"raise": "endpoint down"},
    }
    data = make_csv_dataset(tmp_path / "bench")
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    run = tmp_path / "run"
    args = ["eval", str(data), "--out", str(run), "--agent-fn", "eval_fake_agent:planned", "--no-report"]
    assert CliRunner().invoke(app, args).exit_code == 0
    with FakeOpenAIServer(_judge_by_level) as server:
        result = CliRunner().invoke(
            app,
            [
                "report",
                str(run),
                "--no-plots",
                "--no-html",
                "--consistency-judge",
                "judge",
                "--consistency-base-url",
                server.base_url,
            ],  # fmt: skip
        )
    assert result.exit_code == 0, result.output
    block = json.loads((run / "summary.json").read_text())["grounding"]["consistency"]
    # paris: each level's reasoning is 255 characters, so p = sigma(8 * 0.5) = sigma(4) (paper, Eq. 9);
    # the judge re-derives France / Île-de-France / Paris; the dataset's truth has country and city
    # but no region: c = (1, 0, 1), R_con = (0.1 + 0.3) * sigma(4). berlin answers "final" (no
    # conclusion, R_con 0); sydney and the samples the plan leaves out failed and are left out.
    sigma4 = 1 / (1 + math.exp(-4))
    ok = block["n"]
    assert ok == 2 and block["judge"] == "judge"
    assert block["r_con_mean"] == pytest.approx(0.4 * sigma4 / ok, abs=1e-6)
    assert "GeoAgent's consistency R_con (judge `judge`): mean 0.1964" in (run / "summary.md").read_text()


class _EveryPhraseIsACountry:
    """A place finder that calls every phrase a country (the worst case for the claim count)."""

    def match_names(self, text: str, min_population: int = 0, max_ngram: int = 4) -> list[object]:
        from types import SimpleNamespace

        from geosleuth.core.text import normalize

        place = SimpleNamespace(kind="country", country_code="FR", name="France", population=10**8)
        return [SimpleNamespace(text=normalize(text), place=place)]


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=2000))
def test_place_claims_any_reasoning(reasoning: str) -> None:
    claims = place_claims(reasoning, _EveryPhraseIsACountry())
    assert len(claims) <= MAX_CLAIMS
    assert all(0 <= c.start < max(len(reasoning), 1) for c in claims)


def test_grounding_html_links_samples() -> None:
    block = {"unsupported": {"a<b": {"claims": [{"kind": "place", "text": "Lyon", "cited": "search"}]}}}
    page = render("grounding.html.j2", grounding=grounding_context(block, lambda sid: "samples/a_b-1.html"))
    assert '<a href="samples/a_b-1.html">a&lt;b</a></td><td>place “Lyon” (cites search)' in page
    bare = render("grounding.html.j2", grounding=grounding_context(block))
    assert "<td>a&lt;b</td>" in bare  # no page: the id alone, escaped
