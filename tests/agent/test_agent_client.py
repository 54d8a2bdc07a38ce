"""The fake OpenAI server itself and the chat client's retries, errors and env fallback."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from geosleuth.agent.client import ChatClient, ModelError
from geosleuth.testing import FakeOpenAIServer, delay, error, malformed, reply, tool_call

MSG = [{"role": "user", "content": "hi"}]


def client_for(server: FakeOpenAIServer, **kw: object) -> ChatClient:
    opts: dict[str, object] = {"max_retries": 2, "backoff_s": 0.01, "timeout_s": 2.0}
    opts.update(kw)
    return ChatClient("fake-vlm", server.base_url, "sk-test", **opts)  # type: ignore[arg-type]


def test_fake_server_replays_script_and_records_requests() -> None:
    script = [reply("hello", prompt_tokens=7, completion_tokens=3), error(404, "nope")]
    with FakeOpenAIServer(script) as server:
        r1 = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": MSG, "n": 2})
        r2 = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": MSG})
        r3 = httpx.post(f"{server.base_url}/chat/completions", json={"model": "m", "messages": MSG})
        models = httpx.get(f"{server.base_url}/models").json()
    body = r1.json()
    assert [c["message"]["content"] for c in body["choices"]] == ["hello", "hello"]
    assert body["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert r2.status_code == 404 and r2.json()["error"]["message"] == "nope"
    assert r3.status_code == 500 and server.exhausted == 1
    assert models["data"][0]["id"] == "fake-vlm"
    assert [r.json["messages"] for r in server.chat_requests] == [MSG, MSG, MSG]


async def test_client_parses_tool_calls_usage_and_sends_sampling() -> None:
    script = [reply(None, tool_calls=[tool_call("geocode", {"address": "Zürich"})], reasoning="hmm")]
    async with FakeOpenAIServer(script) as server, client_for(server) as client:
        resp = await client.complete(
            MSG, [{"type": "function"}], temperature=0.7, top_k=20, seed=3, max_tokens=50
        )
    call = resp.first.tool_calls[0]
    assert (call.name, call.arguments) == ("geocode", '{"address": "Zürich"}')
    assert resp.first.reasoning == "hmm" and resp.usage.total_tokens == 15 and resp.latency_s > 0
    sent = server.chat_requests[0]
    assert sent.json["temperature"] == 0.7 and sent.json["top_k"] == 20 and sent.json["seed"] == 3
    assert "top_p" not in sent.json  # unset parameters are not sent
    assert sent.headers["authorization"] == "Bearer sk-test"


async def test_429_then_success_is_retried_honouring_retry_after() -> None:
    script = [error(429, "slow down", retry_after=0.05), reply("ok")]
    async with FakeOpenAIServer(script) as server, client_for(server) as client:
        resp = await client.complete(MSG)
    assert resp.first.content == "ok" and resp.attempts == 2
    gap = server.chat_requests[1].received_at - server.chat_requests[0].received_at
    assert gap >= 0.04


async def test_500_forever_raises_model_error_after_retries() -> None:
    async with FakeOpenAIServer(default=error(500, "boom")) as server, client_for(server) as client:
        with pytest.raises(ModelError, match="HTTP 500") as info:
            await client.complete(MSG)
    assert info.value.attempts == 3 and len(server.chat_requests) == 3


async def test_timeout_is_retried_then_succeeds() -> None:
    script = [delay(4.0), reply("late but fine")]
    async with FakeOpenAIServer(script) as server, client_for(server, timeout_s=1.5) as client:
        resp = await client.complete(MSG)
    assert resp.first.content == "late but fine" and resp.attempts == 2


async def test_malformed_body_is_retried_and_bad_request_is_not() -> None:
    script = [malformed(), reply("ok"), error(400, "bad image")]
    async with FakeOpenAIServer(script) as server, client_for(server) as client:
        assert (await client.complete(MSG)).attempts == 2
        with pytest.raises(ModelError, match="HTTP 400.*bad image") as info:
            await client.complete(MSG)
    assert info.value.attempts == 1 and len(server.chat_requests) == 3


async def test_env_fallback_for_base_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    async with FakeOpenAIServer([reply("env ok")]) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
        async with ChatClient("fake-vlm") as client:
            assert (await client.complete(MSG)).first.content == "env ok"
    assert server.chat_requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_connection_refused_is_a_model_error() -> None:
    server = FakeOpenAIServer().start()
    url = server.base_url
    server.stop()
    async with ChatClient("m", url, max_retries=1, backoff_s=0.01, timeout_s=1.0) as client:
        with pytest.raises(ModelError, match="connection failed"):
            await client.complete(MSG)


async def test_backoff_doubles_with_jitter_and_retry_after_is_capped() -> None:
    script = [error(500), error(500), error(503, retry_after=30), reply("ok")]
    async with (
        FakeOpenAIServer(script) as server,
        client_for(server, max_retries=3, backoff_s=0.1, max_backoff_s=0.3) as client,
    ):
        resp = await client.complete(MSG)
    assert resp.attempts == 4
    times = [r.received_at for r in server.chat_requests]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1  # half to all of 0.1 s, then of 0.2 s
    assert 0.3 <= gaps[2] < 5  # the server asked for 30 s; the client waits its cap


async def test_a_resend_for_a_named_parameter_is_not_a_retry_but_a_429_after_it_is() -> None:
    unsupported = '{"error": {"message": "no", "param": "top_k", "code": "unsupported_parameter"}}'
    script = [replace(error(400), body=unsupported), error(429, retry_after=0.01), reply("ok")]
    async with FakeOpenAIServer(script) as server, client_for(server) as client:
        resp = await client.complete(MSG, top_k=20)
    assert resp.attempts == 2 and len(server.chat_requests) == 3
    assert "top_k" in server.chat_requests[0].json and "top_k" not in server.chat_requests[1].json


def test_the_fake_server_runs_from_the_command_line(tmp_path: Path) -> None:
    """Issue 41: `python -m geosleuth.testing.fake_openai --port N --script FILE` serves a script
    file (the last step repeated) so the harness lines can be tried without a GPU."""
    import socket
    import subprocess
    import sys

    import httpx

    script = tmp_path / "replies.json"
    script.write_text(
        json.dumps(
            [
                "first",
                {
                    "content": "second",
                    "tool_calls": [{"name": "geocode", "arguments": {}}],
                    "fields": {"reasoning_details": [{"type": "reasoning.text", "text": "t"}]},
                },
            ]
        )
    )
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    cmd = [
        sys.executable,
        "-m",
        "geosleuth.testing.fake_openai",
        "--port",
        str(port),
        "--script",
        str(script),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url == f"http://127.0.0.1:{port}/v1"
        answers = [
            httpx.post(f"{base_url}/chat/completions", json={"messages": []}, timeout=10).json()["choices"][
                0
            ]["message"]
            for _ in range(3)
        ]
    finally:
        proc.terminate()
        proc.wait(10)
    assert [a["content"] for a in answers] == ["first", "second", "second"]
    assert answers[1]["tool_calls"][0]["function"]["name"] == "geocode"
    assert answers[1]["reasoning_details"] == [{"type": "reasoning.text", "text": "t"}]
    bad = tmp_path / "bad.json"
    bad.write_text("[42]")
    done = subprocess.run([*cmd[:-1], str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "step 1: expected a string or an object" in done.stderr
