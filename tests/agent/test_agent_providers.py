"""Provider quirks, checked on request bodies against fake 127.0.0.1 servers that reject the
wrong form the way each provider documents it (OpenAI's 400 ``unsupported_parameter`` and
"Unrecognized request argument", Gemini's missing ``thought_signature``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import make_config
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.agent import run_task
from geosleuth.agent.client import ChatClient, ModelError, ProviderProfile, detect_profile
from geosleuth.core.records import Task, TrajectoryStatus
from geosleuth.testing import FakeOpenAIServer, Step, reply, tool_call
from geosleuth.tools.base import ToolRegistry

MSG = [{"role": "user", "content": "hi"}]
ANSWER = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'


def openai_error(status: int, message: str, param: str | None, code: str | None) -> Step:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}
    return Step(kind="error", status=status, body=json.dumps(body))


def openai_reasoning_model(payload: dict[str, Any]) -> Step:
    """What api.openai.com answers for a reasoning model (o-series / gpt-5)."""
    if "max_tokens" in payload:
        return openai_error(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. "
            "Use 'max_completion_tokens' instead.",
            "max_tokens",
            "unsupported_parameter",
        )
    for name in ("top_k", "min_p"):
        if name in payload:
            return openai_error(400, f"Unrecognized request argument supplied: {name}", None, None)
    return reply("ok")


async def test_generic_endpoint_learns_openai_form_from_its_errors() -> None:
    async with (
        FakeOpenAIServer(openai_reasoning_model) as server,
        ChatClient("o4-mini", server.base_url, "k", max_retries=0) as client,
    ):
        assert client.profile.name == "generic"  # a 127.0.0.1 URL says nothing about the dialect
        first = await client.complete(MSG, max_tokens=50, top_k=20, temperature=1.0)
        second = await client.complete(MSG, max_tokens=60, top_k=20)
    bodies = [r.json for r in server.chat_requests]
    assert first.first.content == second.first.content == "ok"
    assert first.attempts == 1  # resends after a named parameter are not retries
    assert "max_tokens" in bodies[0] and bodies[0]["top_k"] == 20
    final = bodies[len(bodies) - 2]
    assert final["max_completion_tokens"] == 50 and "max_tokens" not in final and "top_k" not in final
    assert final["temperature"] == 1.0  # what the server did not refuse is kept
    # the profile remembers: the next request goes out in the accepted form at once
    assert bodies[-1] == {"model": "o4-mini", "messages": MSG, "max_completion_tokens": 60}
    assert client.profile.max_tokens_field == "max_completion_tokens" and "top_k" in client.profile.dropped


async def test_openai_profile_sends_the_accepted_form_first() -> None:
    async with FakeOpenAIServer(openai_reasoning_model) as server:
        profile = detect_profile("https://api.openai.com/v1")
        async with ChatClient("o3", server.base_url, "k", profile=profile, max_retries=0) as client:
            await client.complete(MSG, max_tokens=50, top_k=20, reasoning_effort="low")
    (body,) = [r.json for r in server.chat_requests]
    assert body["max_completion_tokens"] == 50 and body["reasoning_effort"] == "low"
    assert "top_k" not in body and "max_tokens" not in body


async def test_unrelated_400_is_not_adapted_away() -> None:
    def bad(payload: dict[str, Any]) -> Step:
        return openai_error(
            400, "Invalid schema for function 'geocode'", "tools[0]", "invalid_function_parameters"
        )

    async with (
        FakeOpenAIServer(bad) as server,
        ChatClient("m", server.base_url, "k", max_retries=2) as client,
    ):
        with pytest.raises(ModelError, match="Invalid schema") as caught:
            await client.complete(MSG, max_tokens=5)
    assert caught.value.status == 400
    assert len(server.chat_requests) == 1


def test_profiles_detected_from_the_base_url_and_overridable() -> None:
    assert detect_profile("https://api.openai.com/v1").max_tokens_field == "max_completion_tokens"
    assert detect_profile("https://generativelanguage.googleapis.com/v1beta/openai/").name == "gemini"
    assert detect_profile("https://api.deepseek.com").echo_reasoning
    local = detect_profile("http://127.0.0.1:8000/v1")
    assert (local.name, local.max_tokens_field, local.top_k) == ("generic", "max_tokens", True)
    assert detect_profile("http://127.0.0.1:8000/v1", "openai").name == "openai"
    # profiles are copies: learning on one client never leaks into the table
    local.dropped = frozenset({"top_k"})
    assert detect_profile("http://127.0.0.1:8000/v1").dropped == frozenset()


SIGNATURE = "CiQBjz1rX4bZ-thought-signature-bytes=="


def gemini3(payload: dict[str, Any]) -> Step:
    """Gemini 3's OpenAI-compatible endpoint: a tool-call turn sent back without its signature is a 400."""
    for msg in payload["messages"]:
        for call in msg.get("tool_calls") or []:
            sig = ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
            if sig != SIGNATURE:
                message = (
                    "Function call is missing a thought_signature in functionCall parts. This is "
                    "required for tools to work correctly, and missing thought_signature may lead to "
                    "degraded model performance. Additional data, function call "
                    f"`default_api:{call['function']['name']}` , position 2."
                )
                body = [{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": message}}]
                return Step(kind="error", status=400, body=json.dumps(body))
    if any(m["role"] == "tool" for m in payload["messages"]):
        return reply(ANSWER)
    call = tool_call("geocode", {"address": "Zürich"}, "function-call-1")
    call["extra_content"] = {"google": {"thought_signature": SIGNATURE}}
    step = reply(None, tool_calls=[call])
    step.message["reasoning_details"] = [{"type": "reasoning.encrypted", "data": "opaque"}]
    step.message["refusal"] = None
    return step


async def test_gemini_thought_signature_goes_back_with_the_tool_call(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    async with FakeOpenAIServer(gemini3, model="gemini-3-pro-preview") as server:
        cfg = make_config(
            server.base_url,
            prompt_style="thinking_with_map",
            tool_calling="native",
            tool_result_role="tool",
            max_retries=0,
        )
        traj = await run_task(
            Task(id="q", image=str(query_image)), cfg, artifacts_dir=tmp_path, registry=registry
        )
    assert traj.status == TrajectoryStatus.OK, traj.error
    assert traj.prediction is not None and traj.prediction.city == "Zürich"
    second = server.chat_requests[1].json["messages"]
    (assistant,) = [m for m in second if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["extra_content"] == {"google": {"thought_signature": SIGNATURE}}
    assert assistant["tool_calls"][0]["id"] == "function-call-1"
    assert assistant["reasoning_details"] == [{"type": "reasoning.encrypted", "data": "opaque"}]
    assert "refusal" not in assistant  # response-only fields are not echoed (strict servers reject them)
    assert assistant["content"] == ""  # not null, which llama-cpp-python rejects
    # the trajectory keeps the signature too, so a resumed or exported conversation stays valid
    assert traj.messages[2]["tool_calls"][0]["extra_content"]["google"]["thought_signature"] == SIGNATURE


async def test_gemini_without_echo_would_be_rejected() -> None:
    """The fake really enforces the rule: a tool-call turn without the signature is refused."""
    stripped = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "x", "type": "function", "function": {"name": "geocode", "arguments": "{}"}}],
    }
    assert gemini3({"messages": [*MSG, stripped]}).status == 400


def deepseek_thinking(payload: dict[str, Any]) -> Step:
    """DeepSeek's thinking mode with tools: the reasoning of a tool-call turn must come back."""
    assistants = [m for m in payload["messages"] if m["role"] == "assistant"]
    if assistants and not assistants[-1].get("reasoning_content"):
        return openai_error(
            400, "Missing `reasoning_content` field in the assistant message", None, "invalid_request_error"
        )
    if assistants:
        return reply(ANSWER, reasoning="done")
    return reply(None, tool_calls=[tool_call("geocode", {"address": "Zürich"}, "c1")], reasoning="look it up")


async def test_reasoning_echoed_only_where_the_provider_requires_it(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    task = Task(id="q", image=str(query_image))
    async with FakeOpenAIServer(deepseek_thinking) as server:
        base = {"prompt_style": "thinking_with_map", "tool_calling": "native", "max_retries": 0}
        plain = await run_task(task, make_config(server.base_url, **base), registry=registry)
        echoed = await run_task(
            task, make_config(server.base_url, provider="deepseek", **base), registry=registry
        )
    assert plain.status == TrajectoryStatus.MODEL_ERROR and "reasoning_content" in (plain.error or "")
    assert echoed.status == TrajectoryStatus.OK, echoed.error
    sent = server.chat_requests[-1].json["messages"]
    assert [m.get("reasoning_content") for m in sent if m["role"] == "assistant"] == ["look it up"]


def test_profile_fields_are_plain_data() -> None:
    p = ProviderProfile()
    assert (p.max_tokens_field, p.top_k, p.reasoning_effort, p.echo_reasoning) == (
        "max_tokens",
        True,
        True,
        False,
    )


@given(st.integers(100, 599), st.text(max_size=3000))
@settings(max_examples=200, deadline=None)
def test_error_readers_never_raise_on_arbitrary_bodies(status: int, body: str) -> None:
    from geosleuth.agent.client import ModelError, looks_like_image_rejection, unsupported_parameter

    param = unsupported_parameter(status, body)
    assert param is None or (status in (400, 422) and 0 < len(param) <= 40)
    assert isinstance(looks_like_image_rejection(ModelError(f"HTTP {status}: {body}", status)), bool)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
        max_leaves=20,
    )
)
@settings(max_examples=200, deadline=None)
def test_completion_reader_accepts_or_rejects_any_json(body: Any) -> None:
    from geosleuth.agent.client import parse_completion

    try:
        choices, _usage, _model = parse_completion({"choices": [{"message": body}]})
    except ValueError:  # the only failure the client expects (it becomes a retried "unreadable body")
        return
    assert len(choices) == 1


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=20,
)
_CALLS = st.lists(
    st.fixed_dictionaries(
        {"id": _JSON, "function": st.dictionaries(st.sampled_from(["name", "arguments"]), _JSON)}
    ),
    max_size=4,
)


@given(
    st.dictionaries(st.sampled_from(["id", "model", "usage", "x"]), _JSON, max_size=3),
    st.lists(
        st.fixed_dictionaries({"message": st.dictionaries(st.text(max_size=8), _JSON) | _JSON}), max_size=3
    ),
    _CALLS | _JSON,
    st.booleans(),
)
@settings(max_examples=300, deadline=None)
def test_the_completion_decoder_reads_any_body_as_the_standard_decoder_does(
    top: dict[str, Any], choices: list[dict[str, Any]], calls: Any, lone_surrogate: bool
) -> None:
    """Up to the read cap, the lazy decoder gives exactly what ``json.loads`` gives, whatever the
    shapes (bodies msgspec refuses, NaN and lone surrogate escapes, go through json.loads)."""
    from geosleuth.agent.client import decode_completion

    if choices and isinstance(choices[0]["message"], dict):
        choices[0]["message"]["tool_calls"] = calls
    raw = json.dumps({**top, "choices": choices}, ensure_ascii=True)
    if lone_surrogate:
        raw = '{"\\ud800": 1, ' + raw[1:]
    assert _same(decode_completion(raw.encode(), choices=max(1, len(choices))), json.loads(raw))


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values, NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("nan", [False, True])
def test_calls_past_the_read_cap_are_counted_not_decoded(nan: bool) -> None:
    """Issue 41: a reply of 1,024 + 5,000 calls gives 1,024 calls and counts 5,000; the rest stay
    spans of the body's bytes (a body with a bare NaN is decoded whole and counted the same)."""
    import msgspec

    from geosleuth.agent.client import MAX_READ_TOOL_CALLS, decode_completion, parse_completion

    calls = [tool_call("geocode", {"address": f"p{i}"}, f"c{i}") for i in range(MAX_READ_TOOL_CALLS + 5000)]
    body = {"choices": [{"message": {"role": "assistant", "content": "", "tool_calls": calls}}]}
    raw = json.dumps(body).replace('"c0"', "NaN" if nan else '"c0"', 1).encode()
    decoded = decode_completion(raw)
    listed = decoded["choices"][0]["message"]["tool_calls"]
    assert len(listed) == 6024
    assert all(isinstance(call, msgspec.Raw) for call in listed[MAX_READ_TOOL_CALLS:]) is not nan
    ((choice,), _usage, _model) = parse_completion(decoded)
    assert len(choice.tool_calls) == 1024 and choice.dropped_tool_calls == 5000
    assert choice.tool_calls[-1].id == "c1023" and choice.tool_calls[-1].arguments == '{"address": "p1023"}'
