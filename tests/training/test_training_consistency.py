"""GeoAgent's R_con (paper Eq. 8–9) with a judge on a scripted OpenAI-compatible server on 127.0.0.1.

Expected values are worked out by hand from the paper's formulas: R_con = Σ αᵢ·pᵢ·cᵢ,
α = (0.1, 0.6, 0.3), pᵢ = 1/(1+exp(−λ(ℓ̂ᵢ−μ))), ℓ̂ᵢ = (ℓᵢ − 90)/(200 − 90) clipped to [0, 1],
λ = 8, μ = 0.5 (the released constants), ℓᵢ the characters of level i's reasoning.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from geosleuth.core import reward_math as core
from geosleuth.testing.fake_openai import FakeOpenAIServer, delay, error, reply
from geosleuth.training.rewards.batch import score_texts
from geosleuth.training.rewards.consistency import (
    ConsistencyJudge,
    JudgeConfig,
    chain_of_thought,
    judge_answer,
    level_queries,
    reasoning_text,
)


def sigma(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


R1 = (
    "Right-hand traffic, French words on the signs and a blue EU plate strip point to one country." + "x" * 52
)
R2 = "Haussmann facades and a Metro entrance are typical of the capital region. " * 3
R3 = "An iron lattice tower above the river Seine, seen from the Trocadero esplanade to the north. " * 4
assert (len(R1), len(R2) > 200, len(R3) > 200) == (145, True, True)
TRUTH = {
    "lat": 48.8584,
    "lon": 2.2945,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}


def geoagent_rollout(country: str, region: str, place: str, r3: str = R3) -> str:
    chain = {
        "ChainOfThought": {
            "CountryIdentification": {
                "Clues": ["plates"],
                "Reasoning": R1,
                "Conclusion": country,
                "Uncertainty": "",
            },
            "RegionalGuess": {"Clues": ["facades"], "Reasoning": R2, "Conclusion": region, "Uncertainty": ""},
            "PreciseLocalization": {
                "Clues": ["tower"],
                "Reasoning": r3,
                "Conclusion": place,
                "Uncertainty": "",
            },
        },
        "FinalAnswer": f"{country}; {region}; {place}",
    }
    return (
        f"<think>{json.dumps(chain, ensure_ascii=False)}</think>\n"
        '<tool_call>{"name": "web_search", "arguments": {"query": "iron tower"}}</tool_call>\n'
        "<tool_response>Lyon, France: the Fourvière tower</tool_response>\n"
        f"<answer>{country}; {region}; {place}</answer>"
    )


WRONG_PLACE = geoagent_rollout("France", "Île-de-France", "Lyon")

REASONING = " ".join(["The", "signs", "are", "in", "French", "and", "the", "tower", "is", "iron."] * 10)
ROLLOUT = (
    f"<think>{REASONING} So this is France, in Île-de-France, in Paris.</think>\n"
    '<tool_call>{"name": "web_search", "arguments": {"query": "iron tower"}}</tool_call>\n'
    "<tool_response>Paris, France: the Eiffel Tower</tool_response>\n"
    '<answer>{"lat": 48.8584, "lon": 2.2945, "country": "France", '
    '"state": "Île-de-France", "city": "Paris"}</answer>'
)


def _answer_by_level(payload: dict[str, Any]) -> Any:
    prompt = payload["messages"][0]["content"]
    if "which country" in prompt:
        return reply(json.dumps({"answer": "France"}))
    if "province" in prompt:
        return reply(json.dumps({"answer": "Ile-de-France"}))
    return reply('{"answer": "Lyon"}')


def test_length_weight_is_eq_9() -> None:
    assert core.length_weight(145) == pytest.approx(0.5)  # ℓ̂ = 55/110 = μ
    assert core.length_weight(90) == pytest.approx(sigma(-4))
    assert core.length_weight(10) == pytest.approx(sigma(-4))  # clipped at ℓ̂ = 0
    assert core.length_weight(500) == pytest.approx(sigma(4))
    assert core.length_weight(89, hard_cutoff=True) == 0.0  # released: 0 below the range
    assert core.length_weight(201, hard_cutoff=True) == 1.0
    assert core.length_weight(145, lam=2.0, mu=0.25) == pytest.approx(sigma(2.0 * 0.25))
    with pytest.raises(ValueError):
        core.length_weight(1, length_range=(5, 5))


def test_chain_of_thought_levels_and_queries() -> None:
    chain = chain_of_thought(WRONG_PLACE)
    assert chain == {"country": (R1, "France"), "region": (R2, "Île-de-France"), "precise": (R3, "Lyon")}
    queries = level_queries(WRONG_PLACE)
    assert [(q.level, q.reasoning_chars) for q in queries] == [
        ("country", len(R1)),
        ("region", len(R2)),
        ("precise", len(R3)),
    ]
    assert R1[:40] in queries[0].prompt and R2[:40] not in queries[0].prompt  # only level i's reasoning
    assert "Fourvière" not in " ".join(q.prompt for q in queries)  # never tool output
    assert '"country": "France"' in queries[1].prompt  # coarser conclusions as context


def test_paper_compares_with_the_ground_truth() -> None:
    with FakeOpenAIServer(_answer_by_level) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url, api_key="k"))
        [result] = judge.score_texts_sync([WRONG_PLACE], [TRUTH])
        assert len(server.chat_requests) == 3
    # c = (France=France, Ile-de-France≈Île-de-France, Lyon≠Paris) = (1, 1, 0)
    # p = (σ(0), σ(4), σ(4)): R1 has 145 characters, R2 and R3 more than 200
    assert result == pytest.approx(0.1 * 0.5 + 0.6 * sigma(4))
    assert judge.score_texts_sync([WRONG_PLACE]) == [0.0]  # no truth given: nothing to match


def test_released_compares_with_the_model_and_cuts_lengths() -> None:
    with FakeOpenAIServer(_answer_by_level) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url, released=True))
        [result] = judge.score_texts_sync([WRONG_PLACE], [TRUTH])
    # own conclusions, exact match: France = France, Ile-de-France ≠ Île-de-France, Lyon = Lyon
    # p = (σ(0), 1, 1): lengths above 200 give exactly 1
    assert result == pytest.approx(0.1 * 0.5 + 0.3 * 1.0)


def test_judge_failures_count_zero_with_reason() -> None:
    script = [error(400, "bad"), delay(4.0, reply('{"answer": "x"}')), reply('{"answer": "Paris"}')]
    with FakeOpenAIServer(script) as server:
        cfg = JudgeConfig(
            model="judge", base_url=server.base_url, timeout_s=1.5, max_retries=0, concurrency=1
        )
        judge = ConsistencyJudge(cfg)
        [score] = judge.score_texts_sync([ROLLOUT], [TRUTH])
    # only the precise level answered (Paris = truth); its reasoning is the whole reasoning text
    n = len(reasoning_text(ROLLOUT))
    assert score == pytest.approx(0.3 * core.length_weight(n))
    assert {f["level"] for f in judge.failures} == {"country", "region"}
    assert all(f["reason"] for f in judge.failures)


def test_queries_mask_the_conclusions() -> None:
    queries = level_queries(ROLLOUT)
    assert [q.level for q in queries] == ["country", "region", "precise"]
    country = queries[0].prompt
    assert "France" not in country and "Paris" not in country and "[MASKED]" in country
    assert "Eiffel" not in country  # tool output is not the model's reasoning
    precise = queries[2].prompt
    assert "Paris" not in precise.split("Already established")[0]
    assert '"country": "France"' in precise
    assert "lat" not in reasoning_text(ROLLOUT)


def test_empty_rollouts_send_nothing() -> None:
    assert level_queries("") == []
    with FakeOpenAIServer([]) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url))
        assert judge.score_texts_sync(["", "garbage"], [TRUTH, TRUTH]) == [0.0, 0.0]
        assert server.chat_requests == []


def test_judge_answer_forms() -> None:
    assert judge_answer('{"answer": "France"}') == "France"
    assert judge_answer('{"id": "1", "Conclusion": "France"}') == "France"  # GeoAgent's judge format
    assert judge_answer('```json\n{"answer": null}\n```') is None
    assert judge_answer("Germany") == "Germany"
    assert judge_answer("") is None


async def test_judge_inside_running_loop_and_geo_similarity() -> None:
    with FakeOpenAIServer(_answer_by_level) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url))
        batch = score_texts("geo_similarity", [WRONG_PLACE], [TRUTH], judge.score_texts_sync)
    # R_spa: the text answer is geocoded (offline gazetteer). "Lyon, Île-de-France, France"
    # contradicts itself; the most specific part inside the named country wins, so the spatial
    # term charges the model for Lyon instead of paying it the region around Paris.
    d = float(batch.distances_km[0])
    assert 380 < d < 410  # Lyon is ~392 km from the Eiffel Tower
    r_con = 0.1 * 0.5 + 0.6 * sigma(4)
    r_sem = 0.1 * 1.0 + 0.6 * 1.0 + 0.0  # Lyon vs Paris: place similarity 0 (paper gating adds 0.3·0)
    assert batch.scores[0] == pytest.approx(1.5 * math.exp(-d / 200) + r_sem + 0.5 * r_con)


def test_judge_config_repr_hides_the_key() -> None:
    assert "sk-secret" not in repr(JudgeConfig(model="judge", api_key="sk-secret"))


def test_spatial_geocodes_a_consistent_text_answer() -> None:
    """R_spa of a GeoAgent text answer is the distance of its geocoded place (no judge involved)."""
    batch = score_texts("spatial", [geoagent_rollout("France", "Auvergne-Rhône-Alpes", "Lyon")], [TRUTH])
    d = float(batch.distances_km[0])
    assert 380 < d < 410  # Lyon is ~392 km from the Eiffel Tower
    assert batch.scores[0] == pytest.approx(math.exp(-d / 200))
