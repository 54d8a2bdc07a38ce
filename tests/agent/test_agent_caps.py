"""Hostile sizes cost bounded memory: every cap says where it cut, and the model reads its errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from agent_helpers import make_config, text_of

from geosleuth.agent import run_task
from geosleuth.bounds.httpbody import BodyTooLarge, read_capped
from geosleuth.core.records import Task, TrajectoryStatus, Turn, cap_text
from geosleuth.testing import FakeOpenAIServer, reply, tool_call
from geosleuth.tools.base import ToolRegistry

ANSWER_JSON = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'


def task(image: Path) -> Task:
    return Task(id="img-1", image=str(image))


async def test_a_reply_over_the_body_cap_fails_the_sample_once_naming_the_cap(
    query_image: Path, registry: ToolRegistry
) -> None:
    huge = reply("x" * 3_000_000 + ANSWER_JSON)
    async with FakeOpenAIServer([huge, huge, huge]) as server:
        cfg = make_config(server.base_url, max_response_bytes=1_000_000)
        traj = await run_task(task(query_image), cfg, registry=registry)
        sent = len(server.chat_requests)
    assert traj.status is TrajectoryStatus.MODEL_ERROR
    assert "exceeds the 1,000,000-byte cap" in (traj.error or "")
    assert sent == 1  # the same request would get the same reply: not retried
    assert traj.turns == []


async def test_a_streamed_body_is_read_only_up_to_the_cap() -> None:
    """No Content-Length (chunked or compressed): reading stops one chunk past the cap."""
    produced = 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal produced
        while True:
            produced += 65536
            yield b"x" * 65536

    resp = httpx.Response(200, content=endless())
    with pytest.raises(BodyTooLarge, match="more than 1,000,000 bytes"):
        await read_capped(resp, 1_000_000)
    assert produced <= 1_000_000 + 65536
    ok = httpx.Response(200, content=b'{"choices": []}')
    assert await read_capped(ok, 1_000_000) == b'{"choices": []}'


def test_cap_text_keeps_head_and_tail_and_names_the_cut() -> None:
    text = "a" * 50_000 + "END"
    cut, original = cap_text(text, 10_000)
    assert original == 50_003
    assert len(cut) == 10_000 and cut.startswith("a" * 7_000) and cut.endswith("a" * 2_000 + "END")
    assert "50,003 characters, cut to 10,000 here" in cut
    assert cap_text("short", 10_000) == ("short", None)


async def test_a_long_turn_is_stored_cut_with_its_length_and_the_answer_at_its_end_still_counts(
    query_image: Path, registry: ToolRegistry
) -> None:
    long_text = "thinking " * 40_000 + ANSWER_JSON  # 360 kB of text, the answer last
    async with FakeOpenAIServer([reply(long_text, reasoning="r" * 50_000)]) as server:
        cfg = make_config(server.base_url, prompt_style="thinking_with_map", max_turn_text_chars=20_000)
        traj = await run_task(task(query_image), cfg, registry=registry)
    (turn,) = traj.turns
    assert turn.truncated == {"text": len(long_text), "reasoning": 50_000}
    assert len(turn.text) == 20_000 and turn.text.endswith(ANSWER_JSON) and "cut to 20,000" in turn.text
    assert turn.reasoning is not None and len(turn.reasoning) == 20_000
    assert traj.status is TrajectoryStatus.OK and traj.prediction and traj.prediction.city == "Zürich"
    assert traj.messages[-1]["content"] == turn.text  # the conversation keeps the cut text too
    stored = len(traj.model_dump_json())
    assert stored < 100_000  # text, reasoning, replayed message, parsed raw: each at most the cap
    assert Turn.model_validate_json(turn.model_dump_json()).truncated == turn.truncated


async def test_tool_calls_past_the_per_turn_cap_are_counted_not_stored_and_the_model_reads_why(
    query_image: Path, registry: ToolRegistry
) -> None:
    """Issue 41: calls past the cap are neither run, recorded nor replayed; the turn counts them
    and the model reads how many were dropped."""
    calls = [tool_call("geocode", {"address": f"place {i}"}, f"c{i}") for i in range(5)]
    async with FakeOpenAIServer([reply("Looking up.", tool_calls=calls), reply(ANSWER_JSON)]) as server:
        cfg = make_config(server.base_url, prompt_style="thinking_with_map", max_calls_per_turn=2)
        traj = await run_task(task(query_image), cfg, registry=registry)
        second = server.chat_requests[1].json
    records = traj.tool_calls
    assert [c.ok for c in records] == [True, True] and traj.turns[0].dropped_calls == 3
    answers = {m["tool_call_id"]: text_of(m) for m in second["messages"] if m["role"] == "tool"}
    assert set(answers) == {"c0", "c1"}  # every replayed call gets its answer
    replayed = [m for m in second["messages"] if m["role"] == "assistant"][-1]
    assert [c["id"] for c in replayed["tool_calls"]] == ["c0", "c1"]
    told = [text_of(m) for m in second["messages"] if m["role"] == "user"][-1]
    assert "3 more tool call(s) in your last reply were dropped" in told and "at most 2" in told
    assert "47.3769" in answers["c0"]
    assert json.loads(records[0].result_text)["address"] == "place 0"


def test_a_flood_of_tool_calls_through_the_api_stays_small(query_image: Path, tmp_path: Path) -> None:
    """Issue 41: replies of 20,000 tool calls each (5 turns) once became 20,000 records a turn,
    all replayed every turn; now each turn keeps the cap and counts the rest."""
    import geosleuth

    flood = [tool_call("geocode", {"address": "x"}, f"f{i}") for i in range(20_000)]
    script = [reply("", tool_calls=flood) for _ in range(4)] + [reply(ANSWER_JSON)]
    with FakeOpenAIServer(script) as server:
        traj = geosleuth.locate(
            query_image, "fake-vlm", base_url=server.base_url, prompt="thinking_with_map", out=tmp_path,
            max_turns=6,
        )  # fmt: skip
        sent = [len(r.body) for r in server.chat_requests]
    assert traj.status is TrajectoryStatus.OK
    assert [t.dropped_calls for t in traj.turns] == [20_000 - 10] * 4 + [0]
    assert len(traj.tool_calls) == 40
    assert len(traj.model_dump_json()) < 200_000
    assert max(sent) < 200_000  # the conversation replays 10 calls a turn, not 20,000


def test_a_reply_with_more_choices_than_asked_for_is_read_only_as_far_as_asked(
    query_image: Path, tmp_path: Path
) -> None:
    """A server that floods choices (100,000 where one was asked for) costs a scan of its bytes:
    the first choice is the reply, the rest are neither decoded nor built."""
    import geosleuth
    from geosleuth.agent.client import decode_completion, parse_completion
    from geosleuth.testing.fake_openai import malformed

    choice = {"index": 0, "message": {"role": "assistant", "content": ANSWER_JSON}, "finish_reason": "stop"}
    other = {"index": 1, "message": {"role": "assistant", "content": "", "tool_calls": [tool_call("x", {})]}}
    body = json.dumps({"choices": [choice] + [other] * 100_000})
    (read,), _usage, _model = parse_completion(decode_completion(body.encode()))
    assert read.content == ANSWER_JSON and read.tool_calls == []
    with FakeOpenAIServer([malformed(body)]) as server:
        traj = geosleuth.locate(
            query_image, "fake-vlm", base_url=server.base_url, prompt="direct", out=tmp_path
        )
    assert traj.status is TrajectoryStatus.OK and traj.prediction and traj.prediction.city == "Zürich"
    assert traj.tool_calls == [] and len(traj.model_dump_json()) < 50_000


def test_fields_echoed_unread_are_kept_within_the_turn_cap(query_image: Path, tmp_path: Path) -> None:
    """Issue 41: fields the client does not read go back with every later turn (Gemini's thought
    signature must); 1.5 MB of them in each reply were re-sent and stored every turn (30 MiB by
    the fifth). Past the turn's cap they are dropped and the turn says how long they were; a
    small signature on a call still goes back."""
    import geosleuth

    call = {**tool_call("image_zoom_tool", {"bbox_2d": [0, 0, 10, 10]}, "z1")}
    call["extra_content"] = {"google": {"thought_signature": "c2lnbmF0dXJl"}}
    flood = reply("", tool_calls=[call])
    flood.message["reasoning_details"] = [
        {"type": "reasoning.text", "text": "x" * 40, "n": i} for i in range(20_000)
    ]
    details = len(json.dumps(flood.message["reasoning_details"]))  # ~1.5 MB, past the 200,000 cap
    with FakeOpenAIServer([flood] * 3 + [reply(ANSWER_JSON)]) as server:
        traj = geosleuth.locate(
            query_image, "fake-vlm", base_url=server.base_url, prompt="thinking_with_map", out=tmp_path,
            max_turns=5,
        )  # fmt: skip
        sent = [r.json for r in server.chat_requests]
    assert traj.status is TrajectoryStatus.OK
    signed = len(json.dumps({"extra_content": call["extra_content"]}))  # a call's fields, as the message's
    assert [t.truncated.get("extra") for t in traj.turns] == [details + signed] * 3 + [None]
    replayed = [m for m in sent[-1]["messages"] if m["role"] == "assistant"]
    assert len(replayed) == 3 and all("reasoning_details" not in m for m in replayed)
    assert all(
        m["tool_calls"][0]["extra_content"]["google"]["thought_signature"] == "c2lnbmF0dXJl" for m in replayed
    )
    assert max(len(json.dumps(body)) for body in sent) < 200_000
    assert len(traj.model_dump_json()) < 200_000
