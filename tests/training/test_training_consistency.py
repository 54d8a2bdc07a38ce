"""Consistency judge against a scripted OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from geosleuth.testing.fake_openai import FakeOpenAIServer, delay, error, reply
from geosleuth.training.consistency import (
    ConsistencyJudge,
    JudgeConfig,
    judge_answer,
    length_weight,
    level_queries,
    reasoning_text,
)
from geosleuth.training.rewards import score_texts

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
    return reply('{"answer": "Lyon"}')  # the precise level does not match


def test_queries_mask_the_conclusions() -> None:
    queries = level_queries(ROLLOUT)
    assert [q.level for q in queries] == ["country", "region", "precise"]
    country = queries[0].prompt
    assert "France" not in country and "Paris" not in country and "[MASKED]" in country
    assert "Eiffel" not in country  # tool output is not the model's reasoning
    precise = queries[2].prompt
    assert "Paris" not in precise.split("Already established")[0]
    assert '"country": "France"' in precise  # coarser conclusions are given as context
    assert "lat" not in reasoning_text(ROLLOUT)


def test_judge_scores_weighted_matches_times_length() -> None:
    with FakeOpenAIServer(_answer_by_level) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url, api_key="k"))
        results = judge.score_texts_sync([ROLLOUT, ROLLOUT])
        assert len(server.chat_requests) == 3  # the second rollout is served from the cache
    weight = length_weight(reasoning_text(ROLLOUT), 40.0, 10.0)
    assert weight > 0.99
    assert results[0] == pytest.approx((0.1 + 0.6) * weight)
    assert results[1] == results[0]
    assert list(judge.failures) == []


def test_judge_failures_count_zero_with_reason() -> None:
    script = [error(400, "bad"), delay(2.0, reply('{"answer": "x"}')), reply('{"answer": "Paris"}')]
    with FakeOpenAIServer(script) as server:
        cfg = JudgeConfig(
            model="judge", base_url=server.base_url, timeout_s=0.3, max_retries=0, concurrency=1
        )
        judge = ConsistencyJudge(cfg)
        [score] = judge.score_texts_sync([ROLLOUT])
    assert score == pytest.approx(0.3 * length_weight(reasoning_text(ROLLOUT), 40.0, 10.0))
    assert {f["level"] for f in judge.failures} == {"country", "region"}
    assert all(f["reason"] for f in judge.failures)


def test_short_or_empty_reasoning_earns_little() -> None:
    assert length_weight("", 40.0, 10.0) == pytest.approx(1 / (1 + math.exp(4)))
    assert level_queries("") == []
    with FakeOpenAIServer([]) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url))
        assert judge.score_texts_sync(["", "garbage"]) == [0.0, 0.0]
        assert server.chat_requests == []


def test_judge_answer_forms() -> None:
    assert judge_answer('{"answer": "France"}') == "France"
    assert judge_answer('```json\n{"answer": null}\n```') is None
    assert judge_answer("Germany") == "Germany"
    assert judge_answer("") is None


async def test_judge_inside_running_loop_and_geo_similarity() -> None:
    with FakeOpenAIServer(_answer_by_level) as server:
        judge = ConsistencyJudge(JudgeConfig(model="judge", base_url=server.base_url))
        batch = score_texts(
            "geo_similarity", [ROLLOUT], [{"lat": 48.8584, "lon": 2.2945}], judge.score_texts_sync
        )
    weight = length_weight(reasoning_text(ROLLOUT), 40.0, 10.0)
    # distance 0 -> spatial 1; no reference names -> semantic 0; consistency 0.7·w
    assert batch.scores[0] == pytest.approx(1.5 + 0.5 * 0.7 * weight)


def test_judge_config_repr_hides_the_key() -> None:
    assert "sk-secret" not in repr(JudgeConfig(model="judge", api_key="sk-secret"))
