"""OpenAI-compatible chat client over httpx (vLLM, SGLang, Ollama, OpenAI, Gemini, …).

Only the ``/chat/completions`` and ``/models`` endpoints are used, so any compatible server
works. Transient failures (429, 5xx, timeouts, dropped connections, unreadable bodies) are
retried with exponential backoff honouring ``Retry-After``; anything else becomes a
`ModelError` the loop records as the trajectory's status. Like the OpenAI SDK, the client
falls back to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` when nothing else is configured.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import os
import random
import ssl
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from geosleuth.core.records import Usage
from geosleuth.secrets import redact_json, redact_text, register_secret

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SHARD_CONNECTIONS = 32
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


class ModelError(Exception):
    """The model endpoint failed for good (after retries, or a non-retryable error)."""

    def __init__(self, message: str, status: int | None = None, attempts: int = 1) -> None:
        super().__init__(redact_text(message))  # servers echo request headers in error bodies
        self.status = status
        self.attempts = attempts


@dataclass
class RawToolCall:
    """A native tool call as the server returned it; ``arguments`` is usually a JSON string."""

    id: str
    name: str
    arguments: Any


@dataclass
class ChatChoice:
    content: str
    reasoning: str | None = None
    tool_calls: list[RawToolCall] = field(default_factory=list)
    finish_reason: str | None = None


@dataclass
class ChatResponse:
    """One completion: its choices, token usage, wall-clock latency and how many tries it took."""

    choices: list[ChatChoice]
    usage: Usage
    latency_s: float
    model: str
    attempts: int = 1

    @property
    def first(self) -> ChatChoice:
        return self.choices[0]


def resolve_endpoint(
    base_url: str | None, api_key: str | None, api_key_env: str = "OPENAI_API_KEY"
) -> tuple[str, str]:
    """Explicit settings first, then ``OPENAI_BASE_URL`` / the named key variable, then defaults."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = api_key or os.environ.get(api_key_env) or os.environ.get("OPENAI_API_KEY") or ""
    return url.rstrip("/"), key


def _content_text(content: Any) -> str:
    """Message content may be a string or a list of parts; keep the text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


def parse_completion(body: Any) -> tuple[list[ChatChoice], Usage, str]:
    """Read a chat.completion object; raise ValueError when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
        raise ValueError("response has no choices")
    choices = []
    for ch in body["choices"]:
        msg = ch.get("message") or {}
        calls = []
        for i, tc in enumerate(msg.get("tool_calls") or []):
            fn = tc.get("function") or {}
            calls.append(
                RawToolCall(str(tc.get("id") or f"call_{i}"), str(fn.get("name") or ""), fn.get("arguments"))
            )
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        choices.append(
            ChatChoice(_content_text(msg.get("content")), reasoning, calls, ch.get("finish_reason"))
        )
    u = body.get("usage") or {}
    usage = Usage(
        prompt_tokens=int(u.get("prompt_tokens") or 0), completion_tokens=int(u.get("completion_tokens") or 0)
    )
    return choices, usage, str(body.get("model") or "")


class ChatClient:
    """Async chat-completions client with retries; share one per event loop for connection reuse."""

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 120.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        max_connections: int = 512,
    ) -> None:
        self.model = model
        self.base_url, self._api_key = resolve_endpoint(base_url, api_key, api_key_env)
        register_secret(self._api_key)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        # httpcore's pool scans every connection on each request (quadratic at hundreds of
        # concurrent requests), so connections are spread over small pools used in turn.
        per_pool = min(SHARD_CONNECTIONS, max_connections)
        self._pool_options: dict[str, Any] = {
            "base_url": self.base_url,
            "headers": headers,
            "timeout": httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
            "limits": httpx.Limits(max_connections=per_pool, max_keepalive_connections=per_pool),
            "verify": _ssl_context(),
        }
        self._pools: list[httpx.AsyncClient | None] = [None] * max(1, math.ceil(max_connections / per_pool))
        self._in_flight = [0] * len(self._pools)

    def _pool(self, i: int) -> httpx.AsyncClient:
        """Pool ``i``, created on first use (sequential work never needs more than the first)."""
        pool = self._pools[i]
        if pool is None:
            pool = self._pools[i] = httpx.AsyncClient(**self._pool_options)
        return pool

    async def _post(self, body: bytes) -> httpx.Response:
        """POST through the least busy pool (the first of equals, to reuse warm connections)."""
        i = min(range(len(self._pools)), key=self._in_flight.__getitem__)
        self._in_flight[i] += 1
        try:
            return await self._pool(i).post(
                "/chat/completions", content=body, headers={"Content-Type": "application/json"}
            )
        finally:
            self._in_flight[i] -= 1

    async def aclose(self) -> None:
        for pool in self._pools:
            if pool is not None:
                await pool.aclose()

    async def __aenter__(self) -> ChatClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def list_models(self) -> list[str]:
        """Model ids the server offers (used when ``--model`` is a URL)."""
        try:
            resp = await self._pool(0).get("/models")
            resp.raise_for_status()
            return [str(m["id"]) for m in resp.json().get("data", []) if "id" in m]
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ModelError(f"cannot list models at {self.base_url}: {exc}") from None

    def build_payload(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **sampling: Any
    ) -> dict[str, Any]:
        """Request body; sampling parameters left as None are not sent (servers accept different sets)."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            payload["tools"] = tools
        extra = sampling.pop("extra_body", None) or {}
        payload.update({k: v for k, v in sampling.items() if v is not None})
        payload.update(extra)
        return payload

    async def complete(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        top_k: int | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        n: int | None = None,
        stop: list[str] | None = None,
        extra_body: dict[str, Any] | None = None,
        image_urls: dict[str, str] | None = None,
    ) -> ChatResponse:
        """One chat completion, retried on transient failures.

        ``image_urls`` maps image references used in ``messages`` to their data URLs; they are
        spliced into the serialised body so megabytes of base64 are not re-encoded every turn.
        """
        payload = self.build_payload(
            messages,
            tools,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            max_tokens=max_tokens,
            seed=seed,
            n=n,
            stop=stop,
            extra_body=extra_body,
        )
        body = splice_images(json.dumps(payload, ensure_ascii=False), image_urls or {}).encode()
        start = time.perf_counter()
        last = "no attempt made"
        status: int | None = None
        for attempt in range(1, self.max_retries + 2):
            retry_after: float | None = None
            try:
                resp = await self._post(body)
            except httpx.TimeoutException:
                last, status = f"request timed out after {self.timeout_s:g} s", None
            except httpx.TransportError as exc:
                last, status = f"connection failed: {type(exc).__name__}: {exc}", None
            else:
                status = resp.status_code
                if status == 200:
                    try:
                        choices, usage, model = parse_completion(resp.json())
                        choices = [_redacted(c) for c in choices]
                    except ValueError as exc:
                        last = f"unreadable response body ({exc}): {resp.text[:200]!r}"
                    else:
                        latency = time.perf_counter() - start
                        return ChatResponse(choices, usage, latency, model or self.model, attempt)
                else:
                    last = f"HTTP {status}: {resp.text[:300]}"
                    if status not in RETRYABLE_STATUS:
                        raise ModelError(last, status, attempt)
                    retry_after = _retry_after(resp.headers.get("retry-after"))
            if attempt <= self.max_retries:
                await asyncio.sleep(self._backoff(attempt, retry_after))
        raise ModelError(
            f"{last} (gave up after {self.max_retries + 1} attempts)", status, self.max_retries + 1
        )

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        base = self.backoff_s * 2 ** (attempt - 1)
        return min(base * (0.5 + random.random() / 2), self.max_backoff_s)


def _redacted(choice: ChatChoice) -> ChatChoice:
    """A reply that echoes a key (a server reflecting its headers) keeps it out of every record."""
    calls = [RawToolCall(c.id, c.name, redact_json(c.arguments)) for c in choice.tool_calls]
    reasoning = redact_text(choice.reasoning) if choice.reasoning else choice.reasoning
    return ChatChoice(redact_text(choice.content), reasoning, calls, choice.finish_reason)


def splice_images(body: str, image_urls: dict[str, str]) -> str:
    """Swap ``"url": "<ref>"`` for ``"url": "<data URL>"`` (base64 data URLs need no JSON escaping)."""
    for ref, url in image_urls.items():
        key = f'"url": {json.dumps(ref, ensure_ascii=False)}'
        if key in body:
            body = body.replace(key, f'"url": "{url}"')
    return body


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """One TLS context for all pools: building one per client costs tens of milliseconds."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
