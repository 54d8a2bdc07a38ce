"""OpenAI-compatible chat client over httpx (vLLM, SGLang, Ollama, OpenAI, Gemini, …).

Only the ``/chat/completions`` and ``/models`` endpoints are used, so any compatible server
works. Transient failures (429, 5xx, timeouts, dropped connections, unreadable bodies) are
retried with exponential backoff honouring ``Retry-After``; anything else becomes a
`ModelError` the loop records as the trajectory's status. Like the OpenAI SDK, the client
falls back to ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` when nothing else is configured.

Providers differ in what a request may carry. A `ProviderProfile` (detected from the base
URL, overridable) says which token-limit field to send (OpenAI's reasoning models take only
``max_completion_tokens``), whether ``top_k`` / ``reasoning_effort`` are accepted, and
whether reasoning text must go back with the assistant turn (DeepSeek). A 400 naming an
unsupported parameter adapts the profile once and resends, so an unknown server works too.
Assistant turns go back with every field the server sent that the client does not read
(Gemini's ``extra_content.google.thought_signature`` on tool calls, ``reasoning_details``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import os
import random
import re
import ssl
import time
from dataclasses import dataclass, field, replace
from typing import Any, Literal
from urllib.parse import urlparse

import httpx
import msgspec
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from geosleuth.agent.config import MAX_RESPONSE_BYTES, AgentConfig
from geosleuth.bounds.deadline import start_clock
from geosleuth.bounds.httpbody import (
    ACCEPT_ENCODING,
    BodyDamaged,
    BodyEncodingRefused,
    BodyError,
    BodyTooLarge,
    send_capped,
)
from geosleuth.core.records import Usage
from geosleuth.core.surrogates import clean_json, clean_text
from geosleuth.secrets import redact_json, redact_text, register_secret

log = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.openai.com/v1"
SHARD_CONNECTIONS = 32
RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
MAX_ADAPTATIONS = 3  # resends after a 400 naming an unsupported parameter, per request
ADAPTABLE = frozenset({"top_k", "reasoning_effort", "seed", "top_p", "n", "stop"})
"""Optional sampling fields the client may drop when a server says it does not accept them."""
MAX_READ_TOOL_CALLS = 1024
"""Native tool calls of one reply the client decodes and builds (far above any per-turn cap); the
rest of a flood (170k calls in 16 MiB) are only counted, as byte spans: decoding them as Python
objects cost 0.5 s and ~100 MB a reply, building, redacting and recording them tens of seconds
(issue 41)."""
READ_FIELDS = frozenset({"role", "content", "tool_calls"})
"""Assistant-message fields the client reads and rebuilds itself."""
RESPONSE_ONLY = frozenset({"refusal", "annotations", "audio", "function_call", "name"})
"""Response fields a strict server (OpenAI) rejects in a request message: never echoed."""
REASONING_FIELDS = ("reasoning_content", "reasoning")
_UNSUPPORTED = re.compile(
    r"(?:Unsupported parameter|Unrecognized request argument supplied|Unknown parameter)"
    r"\W{0,4}'?\"?(?P<param>[A-Za-z_]{1,40})",
    re.I,
)
_IMAGE_REJECTION = re.compile(
    r"you requested \d+ tokens|maximum context length|context_length_exceeded|context (?:length|window)|"
    r"exceeds? the context|"
    r"too many tokens|prompt is too long|image input (?:is )?not supported|does not support (?:image|vision)|"
    r"not a multimodal model|images? (?:are|is) not supported|image_url is only supported|"
    r"invalid content type|unsupported content (?:part|type)|vision is not enabled",
    re.I,
)


@dataclass
class ProviderProfile:
    """What one endpoint accepts; `detect_profile` guesses it from the URL, errors refine it."""

    name: str = "generic"
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    top_k: bool = True
    reasoning_effort: bool = True
    echo_reasoning: bool = False  # send reasoning_content back on assistant turns
    dropped: frozenset[str] = frozenset()  # parameters the server refused, learned from its errors


PROFILES = {
    "generic": ProviderProfile(),
    "openai": ProviderProfile("openai", "max_completion_tokens", top_k=False),
    "gemini": ProviderProfile("gemini", top_k=False),
    "deepseek": ProviderProfile("deepseek", top_k=False, reasoning_effort=False, echo_reasoning=True),
}
_HOSTS = {
    "api.openai.com": "openai",
    "generativelanguage.googleapis.com": "gemini",
    "api.deepseek.com": "deepseek",
}


def detect_profile(base_url: str, provider: str = "auto") -> ProviderProfile:
    """The named profile, or the one the base URL's host implies (``generic`` otherwise)."""
    if provider != "auto":
        if provider not in PROFILES:
            raise ValueError(f"unknown provider {provider!r}; choose auto, {', '.join(PROFILES)}")
        return replace(PROFILES[provider])
    host = (urlparse(base_url).hostname or "").lower()
    for suffix, name in _HOSTS.items():
        if host == suffix or host.endswith("." + suffix):
            return replace(PROFILES[name])
    return replace(PROFILES["generic"])


def unsupported_parameter(status: int, body: str) -> str | None:
    """The request parameter a 400/422 says the server does not accept, or None."""
    if status not in (400, 422):
        return None
    try:
        err = json.loads(body).get("error")
    except (ValueError, AttributeError):
        err = None
    if isinstance(err, dict) and err.get("code") == "unsupported_parameter":
        param = err.get("param")
        if isinstance(param, str) and 0 < len(param) <= 40:
            return param
    try:  # pydantic servers (FastAPI): {"detail": [{"type": "extra_forbidden", "loc": ["body", "top_k"]}]}
        detail = json.loads(body).get("detail")
        forbidden = [d["loc"][-1] for d in detail if d.get("type") == "extra_forbidden"]
    except (ValueError, AttributeError, TypeError, KeyError, IndexError):
        forbidden = []
    if forbidden and isinstance(forbidden[0], str):
        return forbidden[0]
    m = _UNSUPPORTED.search(body[:2000])
    return m.group("param") if m else None


def looks_like_image_rejection(exc: ModelError) -> bool:
    """The provider refused the request because of its images: input too long, or no image input.

    Read from the error the server returned (status 400/413/422 and its message), never
    guessed from a model name. The caller decides whether the request carried images.
    """
    return exc.status in (400, 413, 422) and bool(_IMAGE_REJECTION.search(str(exc)[:3000]))


class ModelError(Exception):
    """The model endpoint failed for good (after retries, or a non-retryable error).

    ``fatal`` marks errors every later request would repeat (a rejected key, an unknown model
    or URL, an endpoint that never answered): a batch stops on them instead of running on.
    """

    def __init__(
        self, message: str, status: int | None = None, attempts: int = 1, *, fatal: bool = False
    ) -> None:
        super().__init__(redact_text(message))  # servers echo request headers in error bodies
        self.status = status
        self.attempts = attempts
        self.fatal = fatal


FATAL_STATUS = frozenset({401, 403, 404})


@dataclass
class RawToolCall:
    """A native tool call as the server returned it; ``arguments`` is usually a JSON string.

    ``extra`` keeps the fields the client does not read (Gemini's ``extra_content`` with the
    thought signature), to be sent back untouched with the assistant turn.
    """

    id: str
    name: str
    arguments: Any
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class ChatChoice:
    content: str
    reasoning: str | None = None
    tool_calls: list[RawToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # unread message fields, echoed back
    dropped_tool_calls: int = 0  # calls past `MAX_READ_TOOL_CALLS`: counted, never built


def assistant_message(
    choice: ChatChoice,
    content: str | None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    echo_reasoning: bool = False,
) -> dict[str, Any]:
    """The assistant turn as it goes back to the server: what the client rebuilt plus every
    field the server sent that the client does not read (``tool_calls[i]`` keeps the extras
    of the i-th call the server returned)."""
    msg: dict[str, Any] = {"role": "assistant", "content": content}
    for key, value in choice.extra.items():
        if key in REASONING_FIELDS and not echo_reasoning:
            continue
        msg[key] = value
    if tool_calls:
        out = []
        for i, call in enumerate(tool_calls):
            extra = choice.tool_calls[i].extra if i < len(choice.tool_calls) else {}
            out.append({**extra, **call})
        msg["tool_calls"] = out
    return msg


@dataclass
class ChatResponse:
    """One completion: its choices, token usage, wall-clock latency and how many tries it took."""

    choices: list[ChatChoice]
    usage: Usage
    latency_s: float
    model: str
    attempts: int = 1
    replaced_surrogates: int = 0
    """Lone surrogates replaced by U+FFFD in the reply's fields as the response was made."""

    def __post_init__(self) -> None:
        """The reply is where model text enters: every field of it leaves here as valid Unicode."""
        cleaned = [_clean_choice(c) for c in self.choices]
        self.choices = [c for c, _ in cleaned]
        replaced = sum(n for _, n in cleaned)
        if replaced:
            log.warning("replaced %d lone surrogate(s) in the model's reply by U+FFFD", replaced)
        self.replaced_surrogates += replaced

    @property
    def first(self) -> ChatChoice:
        return self.choices[0]


def _clean_choice(choice: ChatChoice) -> tuple[ChatChoice, int]:
    """``choice`` with lone surrogates replaced in its text, reasoning, tool calls and extras."""
    content, replaced = clean_text(choice.content)
    reasoning = choice.reasoning
    if reasoning:
        reasoning, n = clean_text(reasoning)
        replaced += n
    extra, n = clean_json(choice.extra)
    replaced += n
    calls = []
    for call in choice.tool_calls:
        fields, n = clean_json([call.id, call.name, call.arguments, call.extra])
        calls.append(RawToolCall(*fields))
        replaced += n
    if not replaced:
        return choice, 0
    return replace(choice, content=content, reasoning=reasoning, tool_calls=calls, extra=extra), replaced


def resolve_endpoint(
    base_url: str | None, api_key: str | None, api_key_env: str = "OPENAI_API_KEY"
) -> tuple[str, str]:
    """Explicit settings first, then ``OPENAI_BASE_URL`` / the named key variable, then defaults."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
    key = api_key or os.environ.get(api_key_env) or os.environ.get("OPENAI_API_KEY") or ""
    return url.rstrip("/"), key


def endpoint_note(base_url: str | None) -> str:
    """Where the endpoint came from, when the user may not know (the built-in default)."""
    if base_url or os.environ.get("OPENAI_BASE_URL"):
        return ""
    return f" (neither --base-url nor OPENAI_BASE_URL is set, so the default {DEFAULT_BASE_URL} was used)"


def _content_text(content: Any) -> str:
    """Message content may be a string or a list of parts; keep the text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


_OBJECT_SPANS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ITEM_SPANS = msgspec.json.Decoder(list[msgspec.Raw])


def decode_completion(raw: bytes, choices: int = 1) -> Any:
    """The JSON body of a completion, as the standard decoder reads it, except that the choices
    past the first ``choices`` (those asked for) and each choice's ``tool_calls`` past
    `MAX_READ_TOOL_CALLS` stay undecoded spans of bytes (`msgspec.Raw`).

    msgspec splits the body into its fields, the choices and the calls in C without building
    them; only the fields the client reads are then decoded, by the standard decoder, so a flood
    of calls costs a scan of its bytes. A body msgspec refuses where the standard decoder does
    not (lone surrogate escapes, ``NaN``, a field of another shape) is decoded whole, as before;
    the standard decoder's ``ValueError`` / ``RecursionError`` say the body is unreadable.
    """
    try:
        body = _OBJECT_SPANS.decode(raw)
        listed_choices = _ITEM_SPANS.decode(body.pop("choices")) if "choices" in body else None
        read = [_OBJECT_SPANS.decode(c) for c in (listed_choices or [])[:choices]]
        messages = [_OBJECT_SPANS.decode(c.pop("message")) if "message" in c else None for c in read]
        calls = [
            _ITEM_SPANS.decode(m.pop("tool_calls")) if m and "tool_calls" in m else None for m in messages
        ]
    except msgspec.DecodeError:  # ValidationError included: a field of another shape
        return json.loads(raw)
    out = _decoded(body)
    if listed_choices is not None:
        out["choices"] = []
        for choice, message, listed in zip(read, messages, calls, strict=True):
            item = _decoded(choice)
            if message is not None:
                item["message"] = _decoded(message)
                if listed is not None:
                    head = [json.loads(bytes(span)) for span in listed[:MAX_READ_TOOL_CALLS]]
                    item["message"]["tool_calls"] = head + listed[MAX_READ_TOOL_CALLS:]
            out["choices"].append(item)
        out["choices"] += listed_choices[choices:]
    return out


def _decoded(spans: dict[str, msgspec.Raw]) -> dict[str, Any]:
    return {key: json.loads(bytes(span)) for key, span in spans.items()}


def parse_completion(body: Any, choices: int = 1) -> tuple[list[ChatChoice], Usage, str]:
    """Read the first ``choices`` of a chat.completion object (those asked for: a server that
    sends more is not read past them); raise ValueError (only) when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list) or not body["choices"]:
        raise ValueError("response has no choices")
    try:
        return _read_completion(body, max(1, choices))
    except (TypeError, AttributeError) as exc:  # a field of the wrong JSON type
        raise ValueError(f"malformed completion ({type(exc).__name__}: {exc})") from None


def _read_completion(body: dict[str, Any], read: int) -> tuple[list[ChatChoice], Usage, str]:
    choices = []
    if len(body["choices"]) > read:
        log.warning(
            "the reply has %d choices where %d were asked for: only those are read",
            len(body["choices"]),
            read,
        )
    for ch in body["choices"][:read]:
        msg = ch.get("message") or {}
        if not isinstance(msg, dict):
            raise ValueError("choice message is not an object")
        calls = []
        listed = msg.get("tool_calls") or []
        listed = listed if isinstance(listed, list) else []
        for i, tc in enumerate(listed[:MAX_READ_TOOL_CALLS]):
            if not isinstance(tc, dict):
                continue
            fn = tc.get("function") or {}
            extra = {k: v for k, v in tc.items() if k not in ("id", "type", "function", "index")}
            calls.append(
                RawToolCall(
                    str(tc.get("id") or f"call_{i}"), str(fn.get("name") or ""), fn.get("arguments"), extra
                )
            )
        reasoning = msg.get("reasoning_content") or msg.get("reasoning")
        extra = {k: v for k, v in msg.items() if k not in READ_FIELDS | RESPONSE_ONLY and v is not None}
        dropped = max(0, len(listed) - MAX_READ_TOOL_CALLS)
        choices.append(
            ChatChoice(
                _content_text(msg.get("content")), reasoning, calls, ch.get("finish_reason"), extra, dropped
            )
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
        profile: ProviderProfile | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.model = model
        self.base_url, self._api_key = resolve_endpoint(base_url, api_key, api_key_env)
        self.api_key_env = api_key_env
        self._endpoint_note = endpoint_note(base_url)
        self.answered = False  # a completion has succeeded: later connection errors are transient
        self.fatal_error: ModelError | None = None  # the first error every later request would repeat
        self.profile = profile or detect_profile(self.base_url)
        register_secret(self._api_key)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_response_bytes = max_response_bytes
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        headers["Accept-Encoding"] = ACCEPT_ENCODING
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
        """POST through the least busy pool (the first of equals, to reuse warm connections).

        The body is streamed and read only up to ``max_response_bytes`` (counted as it is
        decompressed): a server that answers with hundreds of megabytes, or a small gzip of
        them, costs that cap, not the whole reply. ``timeout_s`` bounds the whole request, not
        each read: a server that sends a byte every few seconds cannot hold it longer.
        """
        i = min(range(len(self._pools)), key=self._in_flight.__getitem__)
        self._in_flight[i] += 1
        try:
            pool = self._pool(i)
            request = pool.build_request(
                "POST", "/chat/completions", content=body, headers={"Content-Type": "application/json"}
            )
            async with asyncio.timeout(self.timeout_s):
                return await send_capped(pool, request, self.max_response_bytes)
        except BodyTooLarge as exc:
            raise ResponseTooLarge(f"{exc} (max_response_bytes)", exc.status) from None
        except BodyEncodingRefused as exc:
            raise ModelError(str(exc), exc.status) from None
        except BodyDamaged as exc:
            raise httpx.DecodingError(str(exc)) from None
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
            pool = self._pool(0)
            async with asyncio.timeout(self.timeout_s):
                resp = await send_capped(pool, pool.build_request("GET", "/models"), self.max_response_bytes)
            resp.raise_for_status()
            return [str(m["id"]) for m in resp.json().get("data", []) if "id" in m]
        except (httpx.HTTPError, BodyError, TimeoutError, ValueError, KeyError, TypeError, AttributeError,
                RecursionError) as exc:  # fmt: skip
            raise ModelError(f"cannot list models at {self.base_url}: {exc}") from None

    def build_payload(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, **sampling: Any
    ) -> dict[str, Any]:
        """Request body in the form this endpoint accepts.

        Parameters left as None are not sent; the token limit goes out under the profile's
        field name; ``top_k`` / ``reasoning_effort`` only where the profile accepts them, and
        nothing the server has refused before. ``extra_body`` is sent as given.
        """
        profile = self.profile
        payload: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            # explicit, as OpenAI's default: some servers (llama.cpp's chatml-function-calling)
            # ignore the tools without it
            payload["tools"] = tools
            payload["tool_choice"] = "auto"
        extra = sampling.pop("extra_body", None) or {}
        limit = sampling.pop("max_tokens", None)
        if limit is not None:
            sampling[profile.max_tokens_field] = limit
        if not profile.top_k:
            sampling.pop("top_k", None)
        if not profile.reasoning_effort:
            sampling.pop("reasoning_effort", None)
        payload.update({k: v for k, v in sampling.items() if v is not None and k not in profile.dropped})
        payload.update(extra)
        return payload

    def adapt(self, param: str, message: str) -> bool:
        """Learn from a 400 naming ``param``; True when the request can be resent in another form."""
        profile = self.profile
        if param in ("max_tokens", "max_completion_tokens"):
            other = "max_completion_tokens" if param == "max_tokens" else "max_tokens"
            if profile.max_tokens_field != param:
                return False
            profile.max_tokens_field = other  # type: ignore[assignment]
        elif param in ADAPTABLE and param not in profile.dropped:
            profile.dropped = profile.dropped | {param}
        else:
            return False
        log.warning("%s does not accept %r (%s); resending without it", self.base_url, param, message[:160])
        return True

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
        reasoning_effort: str | None = None,
        extra_body: dict[str, Any] | None = None,
        image_urls: dict[str, str] | None = None,
    ) -> ChatResponse:
        """One chat completion, retried on transient failures.

        ``image_urls`` maps image references used in ``messages`` to their data URLs; they are
        spliced into the serialised body so megabytes of base64 are not re-encoded every turn.
        A 400 naming an unsupported parameter adapts the profile and resends (not a retry).
        """
        sampling: dict[str, Any] = {
            "temperature": temperature,
            "top_p": top_p,
            "top_k": top_k,
            "max_tokens": max_tokens,
            "seed": seed,
            "n": n,
            "stop": stop,
            "reasoning_effort": reasoning_effort,
        }

        def encode() -> bytes:
            payload = self.build_payload(messages, tools, **sampling, extra_body=extra_body)
            return splice_images(json.dumps(payload, ensure_ascii=False), image_urls or {}).encode()

        body = encode()
        start_clock()  # a sample's time limit starts at its first model request
        start = time.perf_counter()
        adaptations = 0
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception_type(_Transient),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    while True:  # a resend after a 400 naming a parameter stays in this attempt
                        resp = await self._attempt(body, number, start, n or 1)
                        if isinstance(resp, ChatResponse):
                            return resp
                        if adaptations < MAX_ADAPTATIONS and self.adapt(resp.param, resp.text):
                            adaptations += 1
                            body = encode()
                            continue
                        raise resp.error
        except _Transient as exc:
            gave_up = f"{exc.problem} (gave up after {self.max_retries + 1} attempts)"
            if exc.refused and not self.answered:  # the endpoint never answered: nor will it for any sample
                raise self._fatal(
                    f"cannot reach {self.base_url}{self._endpoint_note}: {gave_up} -- is the server up? "
                    "Set --base-url or OPENAI_BASE_URL",
                    None,
                    self.max_retries + 1,
                ) from None
            raise ModelError(f"{gave_up} [{self.base_url}]", exc.status, self.max_retries + 1) from None
        raise AssertionError("unreachable: tenacity returns or raises")

    async def _attempt(
        self, body: bytes, attempt: int, start: float, asked: int = 1
    ) -> ChatResponse | _Unsupported:
        """One request: the response, a server's refusal of a named parameter (to adapt and
        resend), `_Transient` (retried), or a `ModelError` (fatal 401/403/404, any other
        status, the response-size cap: not retried). The reply is read up to the ``asked``
        choices (the request's ``n``)."""
        try:
            resp = await self._post(body)
        except (httpx.TimeoutException, TimeoutError):
            raise _Transient(f"request timed out after {self.timeout_s:g} s", None) from None
        except httpx.TransportError as exc:
            raise _Transient(f"connection failed: {type(exc).__name__}: {exc}", None, refused=True) from None
        except httpx.DecodingError as exc:
            raise _Transient(f"unreadable response body ({exc})", None) from None
        status = resp.status_code
        if status == 200:
            try:
                choices, usage, model = parse_completion(decode_completion(resp.content, asked), asked)
            except ValueError as exc:
                raise _Transient(f"unreadable response body ({exc}): {resp.text[:200]!r}", status) from None
            except RecursionError:  # the same body would come again: not retried
                why = "unreadable response body: JSON nested deeper than the decoder reads"
                raise ModelError(f"{why}: {resp.text[:200]!r}", status, attempt) from None
            self.answered = True
            latency = time.perf_counter() - start
            return ChatResponse([_redacted(c) for c in choices], usage, latency, model or self.model, attempt)
        last = f"HTTP {status}: {resp.text[:300]}"
        if status in FATAL_STATUS:
            error = self._fatal(f"{last} -- {self._hint(status)}", status, attempt)
        elif status in RETRYABLE_STATUS:
            error = _Transient(last, status, retry_after=_retry_after(resp.headers.get("retry-after")))
        else:
            error = ModelError(last, status, attempt)
        param = unsupported_parameter(status, resp.text)
        if param:
            return _Unsupported(param, resp.text, error)
        raise error

    def _hint(self, status: int) -> str:
        """What to change after a status that every request would get again."""
        url = f"{self.base_url}/chat/completions{self._endpoint_note}"
        if status == 404:
            return (
                f"model {self.model!r} or the URL {url} was not found: check --model and --base-url "
                "(OpenAI-compatible servers usually end in /v1)"
            )
        key = self.api_key_env
        if os.environ.get(key):
            sent = f"the key sent is ${key}'s"
        elif self._api_key:
            sent = f"${key} is not set, so $OPENAI_API_KEY's key was sent"
        else:
            sent = f"no key was sent: ${key} is not set"
        return (
            f"{url} refused the request (HTTP {status}); {sent}. Export the right key in ${key} "
            "or name the variable that holds it with --api-key-env"
        )

    def _fatal(self, message: str, status: int | None, attempts: int) -> ModelError:
        error = ModelError(message, status, attempts, fatal=True)
        if self.fatal_error is None:
            self.fatal_error = error
        return error

    def _wait(self, state: RetryCallState) -> float:
        """The server's Retry-After when it sent one (up to the cap), else exponential backoff
        from ``backoff_s`` with jitter (half to all of it), up to ``max_backoff_s``."""
        problem = state.outcome.exception() if state.outcome is not None else None
        retry_after = problem.retry_after if isinstance(problem, _Transient) else None
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        base = self.backoff_s * 2 ** (state.attempt_number - 1)
        return min(base * (0.5 + random.random() / 2), self.max_backoff_s)


class _Transient(Exception):
    """One attempt's failure that another attempt may not repeat: tenacity waits and retries."""

    def __init__(
        self, problem: str, status: int | None, *, refused: bool = False, retry_after: float | None = None
    ) -> None:
        super().__init__(problem)
        self.problem = problem
        self.status = status
        self.refused = refused  # could not connect at all
        self.retry_after = retry_after


@dataclass
class _Unsupported:
    """A 400 naming a parameter the server does not accept; ``error`` is raised if the profile
    cannot adapt to it."""

    param: str
    text: str
    error: Exception


class ResponseTooLarge(ModelError):
    """The server's reply is longer than the client's cap; not retried (it would answer the same)."""


def _redacted(choice: ChatChoice) -> ChatChoice:
    """A reply that echoes a key (a server reflecting its headers) keeps it out of every record.

    ``extra`` fields (thought signatures, encrypted reasoning) are opaque to us and must go back
    to the server byte for byte, so they are kept as sent; every file exit redacts again.
    """
    calls = [
        replace(c, name=redact_text(c.name), id=redact_text(c.id), arguments=redact_json(c.arguments))
        for c in choice.tool_calls
    ]
    reasoning = redact_text(choice.reasoning) if choice.reasoning else choice.reasoning
    return replace(choice, content=redact_text(choice.content), reasoning=reasoning, tool_calls=calls)


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


def make_client(
    config: AgentConfig, model: str | None = None, base_url: str | None = None, *, agent: bool = True
) -> ChatClient:
    """A chat client for the configured endpoint (``--model URL`` means that server's first model).

    The request-dialect settings (provider, token-limit field, reasoning echo) are the agent
    model's; a verifier or observer client (``agent=False``) detects its own from its URL.
    """
    name = model or config.model or ""
    url = base_url or config.base_url
    if name.startswith(("http://", "https://")):
        url, name = name, ""
    client = ChatClient(
        name,
        url,
        api_key_env=config.api_key_env,
        timeout_s=config.request_timeout_s,
        max_retries=config.max_retries,
        backoff_s=config.retry_backoff_s,
        max_response_bytes=config.max_response_bytes,
    )
    if agent:
        profile = detect_profile(client.base_url, config.provider)
        if config.max_tokens_param is not None:
            profile.max_tokens_field = config.max_tokens_param
        if config.echo_reasoning is not None:
            profile.echo_reasoning = config.echo_reasoning
        client.profile = profile
    return client
