"""Untagged JSON tool calls, as small local models write them: bare or fenced, ending the reply."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.agent.toolcalls import parse_text_calls
from geosleuth.testing import cpu_seconds

KNOWN = {"geocode", "web_search", "image_zoom_in_tool"}
ARGS = st.dictionaries(
    st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12),
    st.one_of(st.text(max_size=30), st.integers(-10_000, 10_000), st.lists(st.integers(0, 2000), max_size=4)),
    max_size=3,
)
WRAPS = st.sampled_from(
    ["{}", "```json\n{}\n```", "```\n{}\n```", "Let me check.\n{}", "I look it up.\n```json\n{}\n```"]
)


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(sorted(KNOWN)), args=ARGS, wrap=WRAPS)
def test_a_json_call_of_a_known_tool_is_read_bare_fenced_or_after_prose(
    name: str, args: dict[str, object], wrap: str
) -> None:
    call_json = json.dumps({"name": name, "arguments": args}, ensure_ascii=False)
    (call,) = parse_text_calls(wrap.replace("{}", call_json), KNOWN)
    assert (call.name, call.arguments, call.error) == (name, args, None)


@settings(max_examples=150, deadline=None)
@given(name=st.text(max_size=15).filter(lambda n: n not in KNOWN), args=ARGS, wrap=WRAPS)
def test_json_naming_no_known_tool_is_no_call(name: str, args: dict[str, object], wrap: str) -> None:
    text = wrap.replace("{}", json.dumps({"name": name, "arguments": args}))
    assert parse_text_calls(text, KNOWN) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from('{}[]"`:,name geocode\n\\ '), max_size=400))
def test_any_text_parses_without_crashing(text: str) -> None:
    for call in parse_text_calls(text, KNOWN):
        assert call.name in KNOWN or call.error


def test_the_answer_json_is_not_a_call() -> None:
    answer = '{"city": "Berlin", "country": "Germany", "lat": 52.52437, "lon": 13.41053}'
    assert parse_text_calls(answer, KNOWN) == []
    assert parse_text_calls(f"```json\n{answer}\n```", KNOWN) == []


def test_arguments_given_as_a_json_string_or_parameters_are_read() -> None:
    (a,) = parse_text_calls('{"name": "geocode", "arguments": "{\\"address\\": \\"Paris\\"}"}', KNOWN)
    (b,) = parse_text_calls('{"name": "geocode", "parameters": {"address": "Paris"}}', KNOWN)
    assert a.arguments == b.arguments == {"address": "Paris"}


def test_a_huge_untagged_reply_is_read_in_linear_time() -> None:
    text = '{"name": "geocode", "arguments": {"address": "' + "x" * 200_000 + '"}}' + "{" * 100_000
    calls, seconds = cpu_seconds(parse_text_calls, text, KNOWN)
    assert calls == []  # longer than a call may be: not decoded
    assert seconds < 2.0
