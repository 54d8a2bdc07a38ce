"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests and benchmarks.

The server runs its own asyncio loop in a background thread, so it works the same from
synchronous tests, async tests (it never blocks their loop) and benchmark scripts. Each
``POST …/chat/completions`` consumes the next `Step` of the script (or asks a callable
script for one); ``GET …/models`` lists the configured model name. Every request is
recorded in `FakeOpenAIServer.requests` with its parsed JSON body for assertions.

From the command line it lets a user try the harness lines without a GPU::

    python -m geosleuth.testing.fake_openai --port 8001 --script replies.json

``replies.json`` is a JSON list (or JSON Lines) of steps played in order, the last one repeated:
a string is an answer's text; an object has ``content``, ``reasoning`` and ``tool_calls``
(``[{"name": …, "arguments": {…}}]``) and, in ``fields``, any other fields of the message (a
provider's ``reasoning_details``, say), or ``status`` and ``error`` for an HTTP error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import signal
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

StepKind = Literal["reply", "error", "malformed"]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 429: "Too Many Requests", 500: "Internal Error"}


@dataclass(frozen=True)
class Step:
    """One scripted answer: a chat completion, an HTTP error or a raw (malformed) body."""

    kind: StepKind
    status: int = 200
    message: dict[str, Any] = field(default_factory=dict)  # the assistant message of a reply
    finish_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)
    body: str = ""  # raw body for errors and malformed replies
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0  # wait before answering (to trigger client timeouts)
    raw: bytes = b""  # the body's bytes as sent, when not text (a gzip body with its header)
    drip_s: float = 0.0  # send the body a byte at a time, this long apart (a slowloris server)


def tool_call(name: str, arguments: dict[str, Any] | str, call_id: str | None = None) -> dict[str, Any]:
    """A native tool call as it appears in ``message.tool_calls``; a str is sent verbatim."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return {"id": call_id or "", "type": "function", "function": {"name": name, "arguments": args}}


def reply(
    content: str | None = None,
    *,
    tool_calls: Sequence[dict[str, Any]] = (),
    reasoning: str | None = None,
    prompt_tokens: int = 10,
    completion_tokens: int = 5,
    finish_reason: str | None = None,
) -> Step:
    """A successful chat completion with text and/or native tool calls."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    return Step(
        kind="reply",
        message=message,
        finish_reason=finish_reason or ("tool_calls" if tool_calls else "stop"),
        usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    )


def error(status: int = 500, message: str = "scripted error", retry_after: float | None = None) -> Step:
    """An HTTP error with an OpenAI-style error body (429 may carry ``Retry-After``)."""
    headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
    body = json.dumps({"error": {"message": message, "type": "server_error", "code": status}})
    return Step(kind="error", status=status, body=body, headers=headers)


def malformed(body: str = '{"choices": [ {"message": ', status: int = 200) -> Step:
    """A response whose body is not a valid chat completion."""
    return Step(kind="malformed", status=status, body=body)


def escaped_reply(step: Step, marker: str, escape: str) -> Step:
    """``step`` (a reply) sent as JSON text with each ``marker`` swapped for ``escape`` verbatim:
    what valid JSON allows and a Python str cannot write back, such as a lone surrogate's
    ``\\ud800``. ``marker`` should be ASCII, so that it survives JSON encoding unchanged."""
    completion = {
        "id": "chatcmpl-fake-escaped",
        "object": "chat.completion",
        "created": 0,
        "model": "fake",
        "choices": [{"index": 0, "message": step.message, "finish_reason": step.finish_reason}],
        "usage": step.usage,
    }
    return Step(kind="malformed", status=200, body=json.dumps(completion).replace(marker, escape))


def delay(seconds: float, then: Step | None = None) -> Step:
    """Answer with ``then`` (default: an empty reply) only after ``seconds``."""
    return replace(then or reply(""), delay_s=seconds)


@dataclass
class RecordedRequest:
    """What a client sent: method, path, headers (lower-case names), raw body and its JSON."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    json: Any = None
    received_at: float = 0.0

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.json or {}).get("messages", [])) if isinstance(self.json, dict) else []


Script = Sequence[Step] | Callable[[dict[str, Any]], Step]


class FakeOpenAIServer:
    """Replays ``script`` to OpenAI-compatible clients and records their requests.

    Args:
        script: a list of steps consumed in order, or a callable ``(request_json) -> Step``
            asked for every chat request (useful for benchmarks that never run out).
        model: the name listed by ``GET /v1/models``.
        port: the port on 127.0.0.1 to listen on (0: any free one, read back from ``port``).
        default: the step served once a list script is exhausted; without one the server
            answers 500 "script exhausted" so a test sees the over-run.
    """

    def __init__(
        self, script: Script = (), *, model: str = "fake-vlm", default: Step | None = None, port: int = 0
    ) -> None:
        self._script = script if callable(script) else list(script)
        self._port = port  # 0: any free port
        self._bind_error: OSError | None = None
        self._index = 0
        self.model = model
        self.default = default
        self.requests: list[RecordedRequest] = []
        self.exhausted = 0  # requests that arrived after the script ran out
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """OpenAI base URL (``…/v1``) to hand to clients."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        if self._bind_error is not None:
            raise self._bind_error
        return self

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop = None

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> FakeOpenAIServer:
        return self.start()

    async def __aexit__(self, *exc: object) -> None:
        self.stop()

    @property
    def chat_requests(self) -> list[RecordedRequest]:
        """Only the chat-completion requests, in arrival order."""
        with self._lock:
            return [r for r in self.requests if r.path.endswith("/chat/completions")]

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._handle, "127.0.0.1", self._port, backlog=1024)
            )
        except OSError as exc:  # the port is taken: `start` raises it
            self._bind_error = exc
            self._loop = None
            loop.close()
            self._ready.set()
            return
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(loop):
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    # -- HTTP ------------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve keep-alive HTTP/1.1 requests on one connection until the client closes it."""
        try:
            while True:
                request = await self._read_request(reader)
                if request is None:
                    break
                status, headers, body, step = self._respond(request)
                if step.delay_s:
                    await asyncio.sleep(step.delay_s)
                head = [f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}"]
                head += [f"{k}: {v}" for k, v in headers.items()]
                head += [f"Content-Length: {len(body)}", "Connection: keep-alive", "", ""]
                writer.write("\r\n".join(head).encode())
                await self._send_body(writer, body, step.drip_s)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _send_body(writer: asyncio.StreamWriter, body: bytes, drip_s: float) -> None:
        if not drip_s:
            writer.write(body)
            await writer.drain()
            return
        for i in range(len(body)):
            writer.write(body[i : i + 1])
            await writer.drain()
            await asyncio.sleep(drip_s)

    async def _read_request(self, reader: asyncio.StreamReader) -> RecordedRequest | None:
        line = await reader.readline()
        if not line:
            return None
        method, path, _ = line.decode("latin-1").split(" ", 2)
        headers: dict[str, str] = {}
        while (h := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = h.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            parsed = None
        request = RecordedRequest(method, path, headers, body, parsed, time.time())
        with self._lock:
            self.requests.append(request)
        return request

    def _respond(self, request: RecordedRequest) -> tuple[int, dict[str, str], bytes, Step]:
        json_headers = {"Content-Type": "application/json"}
        plain = Step(kind="malformed")
        if request.method == "GET" and request.path.rstrip("/").endswith("/models"):
            body = {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
            return 200, json_headers, json.dumps(body).encode(), plain
        if request.method != "POST" or not request.path.endswith("/chat/completions"):
            return 404, json_headers, b'{"error": {"message": "not found"}}', plain
        step = self._next_step(request)
        if step.raw:
            body_bytes = step.raw
        elif step.kind == "reply":
            body_bytes = json.dumps(self._completion(step, request.json), ensure_ascii=False).encode()
        else:
            body_bytes = step.body.encode()
        return step.status, {**json_headers, **step.headers}, body_bytes, step

    def _next_step(self, request: RecordedRequest) -> Step:
        if callable(self._script):
            return self._script(request.json if isinstance(request.json, dict) else {})
        with self._lock:
            if self._index < len(self._script):
                step = self._script[self._index]
                self._index += 1
                return step
            self.exhausted += 1
        return self.default or error(500, "fake server: script exhausted")

    def _completion(self, step: Step, payload: Any) -> dict[str, Any]:
        """A chat.completion object; ``n`` > 1 repeats the scripted choice."""
        n = payload.get("n", 1) if isinstance(payload, dict) else 1
        serial = next(self._ids)
        choices = []
        for i in range(max(1, int(n or 1))):
            message = dict(step.message)  # the script stays as written: only the ids are filled in
            if "tool_calls" in message:
                message["tool_calls"] = [
                    {**call, "id": call.get("id") or f"call_{serial}_{i}_{j}"}
                    for j, call in enumerate(message["tool_calls"])
                ]
            choices.append({"index": i, "message": message, "finish_reason": step.finish_reason})
        usage = dict(step.usage)
        usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage.get("completion_tokens", 0)
        return {
            "id": f"chatcmpl-fake-{serial}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": (payload or {}).get("model", self.model) if isinstance(payload, dict) else self.model,
            "choices": choices,
            "usage": usage,
        }


def script_steps(text: str) -> list[Step]:
    """The steps of a script file (JSON list or JSON Lines); `ValueError` names a bad entry."""
    stripped = text.strip()
    entries = (
        json.loads(stripped)
        if stripped.startswith("[")
        else [json.loads(x) for x in stripped.splitlines() if x.strip()]
    )
    steps = []
    for number, entry in enumerate(entries, start=1):
        if isinstance(entry, str):
            steps.append(reply(entry))
        elif isinstance(entry, dict) and "status" in entry:
            steps.append(error(int(entry["status"]), str(entry.get("error", "scripted error"))))
        elif isinstance(entry, dict):
            calls = [
                tool_call(str(c["name"]), c.get("arguments", {}), c.get("id"))
                for c in entry.get("tool_calls", [])
            ]
            step = reply(entry.get("content"), tool_calls=calls, reasoning=entry.get("reasoning"))
            step.message.update(entry.get("fields") or {})
            steps.append(step)
        else:
            raise ValueError(f"step {number}: expected a string or an object, got {type(entry).__name__}")
    if not steps:
        raise ValueError("the script has no step")
    return steps


def main(argv: Sequence[str] | None = None) -> int:
    """Serve a script file on 127.0.0.1 until interrupted; the base URL goes to stdout."""
    parser = argparse.ArgumentParser(prog="python -m geosleuth.testing.fake_openai", description=main.__doc__)
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    parser.add_argument("--script", type=Path, required=True, help="JSON list or JSON Lines of steps")
    parser.add_argument("--model", default="fake-vlm", help="the model name GET /v1/models lists")
    args = parser.parse_args(argv)
    try:
        steps = script_steps(args.script.read_text(encoding="utf-8"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.exit(2, f"error: {args.script}: {exc}\n")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        with FakeOpenAIServer(steps[:-1], model=args.model, default=steps[-1], port=args.port) as server:
            print(server.base_url, flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                stop.wait()
    except OSError as exc:
        parser.exit(2, f"error: cannot listen on 127.0.0.1:{args.port}: {exc}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
