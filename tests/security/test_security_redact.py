"""Secret redaction by value and by pattern (issue 14, item 5): unit cases, repros, fuzzing."""

from __future__ import annotations

import json
import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geosleuth.agent.client import ModelError
from geosleuth.core.redact import env_secret_values, redact, redact_value
from geosleuth.secrets import RedactingFilter, redact_text, register_secret
from geosleuth.testing import cpu_seconds

KEY = "k3y-Value/With+Symbols=="


@pytest.mark.parametrize(
    ("text", "gone"),
    [
        ("Authorization: Bearer sk-abcdefghijklmnopqrstuvwx", "sk-abcdefghijklmnopqrstuvwx"),
        ('{"headers": {"authorization": "Bearer abc.def-123456"}}', "abc.def-123456"),
        ("GET https://maps.example.com/api?q=Paris&key=AIzaSyA-1234567890abcdefghijklmnopqrstu", "AIzaSy"),
        ("https://api.example.com/v1?api_key=secret123456&lang=en", "secret123456"),
        ("x-api-key: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
        ('{"api_key": "tvly-0123456789abcdef0123"}', "tvly-0123456789abcdef0123"),
        ("the token is hf_abcdefghijklmnopqrstuvwxyz012345", "hf_abcdefghijklmnopqrstuvwxyz012345"),
        ("proxy-authorization=Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ],
)
def test_patterns_catch_keys_nobody_registered(text: str, gone: str) -> None:
    clean = redact(text)
    assert gone not in clean and "***" in clean


def test_values_are_caught_in_every_encoding() -> None:
    from urllib.parse import quote

    text = f"raw {KEY} url {quote(KEY, safe='')} json {json.dumps(KEY)}"
    clean = redact(text, [KEY])
    assert KEY not in clean and quote(KEY, safe="") not in clean and clean.count("***") == 3


def test_ordinary_text_is_left_alone() -> None:
    text = (
        "max_tokens=512, the token budget, a key clue: the sign says 'Bahnhofstrasse'; authorization needed"
    )
    assert redact(text) == text
    assert redact('{"max_tokens": 512, "tokenizer": "qwen"}') == '{"max_tokens": 512, "tokenizer": "qwen"}'


def test_json_stays_json_after_redaction() -> None:
    body = json.dumps(
        {
            "error": f'bad header Authorization: Bearer {KEY}\\" and "key={KEY}"',
            "token": 'abc\\"def',
            "nested": [{"api_key": KEY}],
        }
    )
    clean = redact(body, [KEY])
    json.loads(clean)
    assert KEY not in clean


def test_environment_keys_are_known_but_budgets_and_names_are_not() -> None:
    env = {
        "OPENAI_API_KEY": "sk-env-value-123456",
        "GEOSLEUTH_GOOGLE_API_KEY": "AIza-env-value",
        "HF_TOKEN": "hf_env_value_1234",
        "API_KEY_ENV": "OPENAI_API_KEY",
        "GEOSLEUTH_MAX_TOKENS": "12345678",
        "SHORT_API_KEY": "abc",
        "PATH": "/usr/bin:/bin",
    }
    assert sorted(env_secret_values(env)) == ["AIza-env-value", "hf_env_value_1234", "sk-env-value-123456"]


def test_process_registry_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEOSLEUTH_SERPER_API_KEY", "serper-planted-0042")
    register_secret("registered-planted-0043")
    text = "a serper-planted-0042 b registered-planted-0043 c"
    assert redact_text(text) == "a *** b *** c"


def test_model_error_keeps_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's repro: a server echoing the Authorization header in its error body."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-echoed-by-the-server-77")
    body = '{"error": {"message": "Invalid header Authorization: Bearer sk-echoed-by-the-server-77"}}'
    exc = ModelError(f"HTTP 401: {body}", 401)
    assert "sk-echoed-by-the-server-77" not in str(exc) and "***" in str(exc)


def test_log_records_are_redacted(caplog: pytest.LogCaptureFixture) -> None:
    register_secret("logged-planted-0044")
    logger = logging.getLogger("geosleuth.test.redact")
    logger.addFilter(RedactingFilter())
    with caplog.at_level(logging.INFO, logger="geosleuth.test.redact"):
        logger.info("calling %s with %s", "https://x.org/?key=abc", "logged-planted-0044")
    assert "logged-planted-0044" not in caplog.text and "key=abc" not in caplog.text


def test_values_in_nested_records() -> None:
    record = {"a": [KEY, {"b": f"x{KEY}y", KEY: 1}], "n": 3, "deep": [[[[f"{KEY}"]]]]}
    clean = redact_value(record, [KEY])
    assert KEY not in json.dumps(clean) and clean["n"] == 3


# --- fuzzing ------------------------------------------------------------------------------------

PIECES = st.sampled_from(
    [KEY, "Authorization", ":", " ", "Bearer ", "key=", "&", "?", '"', "\\", "api_key", '": "', "\n", "sk-",
     "abcdefghijklmnopqrstuvwxyz", "=", "x-api-key", "token", "é", "{", "}", "%2F"]
)  # fmt: skip
PER_CALL_S = 1.0
"""CPU bound on one call, far above what a linear pass over these sizes takes."""


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=80).map("".join), st.text(max_size=200))
def test_fuzz_redaction_removes_the_key_in_bounded_time(built: str, noise: str) -> None:
    for text in (built, noise + built, built + noise):
        clean, seconds = cpu_seconds(redact, text, [KEY])
        assert seconds < PER_CALL_S
        assert KEY not in clean
        assert redact(clean, [KEY]) == clean  # idempotent: redacting twice changes nothing


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=40),
        lambda c: st.lists(c) | st.dictionaries(st.text(max_size=10), c),
        max_leaves=30,
    )
)
def test_fuzz_json_documents_stay_valid(value: object) -> None:
    text = json.dumps({"v": value, "authorization": f"Bearer {KEY}", "u": f"https://x/?key={KEY}"})
    clean = redact(text, [KEY])
    json.loads(clean)
    assert KEY not in clean


@pytest.mark.parametrize(
    "text",
    [
        "Authorization:" + " " * 200_000,
        "key=" * 100_000,
        '"api_key": "' + "\\" * 200_000,
        "Bearer " * 50_000,
        "sk-" + "a" * 300_000,
    ],
)
def test_large_adversarial_inputs_stay_fast(text: str) -> None:
    _, seconds = cpu_seconds(redact, text, [KEY])
    assert seconds < PER_CALL_S


@pytest.mark.slow
@settings(max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(PIECES, max_size=3000).map("".join))
def test_fuzz_redaction_long(text: str) -> None:
    clean, seconds = cpu_seconds(redact, text, [KEY])
    assert seconds < PER_CALL_S and KEY not in clean


def test_a_key_echoed_as_a_tool_call_name_stays_out_of_the_api_trajectory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    """Issue 41 (low): a key the model echoed as a tool-call name (or id) was kept in the
    trajectory `geosleuth.locate` returns."""
    from pathlib import Path

    from PIL import Image

    import geosleuth
    from geosleuth.testing import FakeOpenAIServer, reply, tool_call

    key = "sk-echoed-as-a-tool-name-4242"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    folder = Path(str(tmp_path))
    Image.new("RGB", (64, 48)).save(folder / "q.png")
    answer = '{"lat": 47.37, "lon": 8.54, "city": "Zürich", "country": "Switzerland"}'
    script = [reply("", tool_calls=[tool_call(key, {"q": key}, key)]), reply(answer)]
    with FakeOpenAIServer(script) as server:
        traj = geosleuth.locate(
            folder / "q.png", "m", base_url=server.base_url, prompt="thinking_with_map", out=folder
        )
    assert key not in traj.model_dump_json() and traj.tool_calls and traj.tool_calls[0].name == "***"
