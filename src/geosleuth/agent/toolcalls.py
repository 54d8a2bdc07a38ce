"""Tool calls out of model output: native ``tool_calls`` and calls written in the text.

Text styles understood: ``<tool_call>{"name": …, "arguments": …}</tool_call>`` (Qwen family;
an unclosed final block counts, since servers often stop at the closing tag), the
``name(arg=value, …)`` call style, inside ``<tool_call>`` tags or on its own line when
``name`` is a known tool, and — what small models write without tags — a JSON call of a known
tool ending the reply, bare or in a code fence. A call that cannot be read is kept with an
``error`` so the loop can show the model what went wrong instead of failing.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from geosleuth.agent.client import RawToolCall
from geosleuth.core.records import MAX_ARGUMENT_CHARS as RECORD_ARGUMENT_CHARS
from geosleuth.core.records import cap_arguments

_TAGGED = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.S | re.I)
"""No whitespace runs matched around the lazy group: with them, a block of spaces made it quadratic."""
_CALL_START = re.compile(r"^[ \t]*`?(?P<name>[A-Za-z_]\w*)\(", re.M)
_CALL_END = re.compile(r"`?[ \t]*(?:\n|$)")
MAX_CALL_CHARS = 4000
MAX_ARGUMENT_CHARS = 65_536
"""Longer argument strings are refused unread (decoding megabytes costs time and memory)."""


@dataclass
class ParsedCall:
    """One tool call ready to run, or with ``error`` set when it could not be understood."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw: str
    error: str | None = None

    @property
    def arguments_json(self) -> str:
        """Arguments as the JSON string OpenAI messages carry (the raw text if unparsable),
        capped like the record's copy so a huge argument is not stored twice."""
        if self.arguments is None:
            if len(self.raw) <= RECORD_ARGUMENT_CHARS:
                return self.raw
            return json.dumps(cap_arguments({"_raw": self.raw}), ensure_ascii=False)
        return json.dumps(cap_arguments(self.arguments), ensure_ascii=False)


def _lenient_json(text: str) -> Any:
    """json.loads, then Python-literal syntax (single quotes, True/None, trailing commas)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        pass
    try:
        return json.loads(re.sub(r",\s*([}\]])", r"\1", text))
    except RecursionError:
        raise ValueError("nested too deeply") from None


def decode_arguments(raw: Any) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments as a dict, or an error message the model can act on."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, str) and len(raw) > MAX_ARGUMENT_CHARS:
        return None, f"arguments are too long ({len(raw):,} characters; at most {MAX_ARGUMENT_CHARS:,})"
    value = raw
    for decoded in range(2):  # some servers double-encode: "{\"bbox_2d\": …}"
        if not isinstance(value, str):
            break
        text = value.strip()
        try:
            value = _lenient_json(text)
        except ValueError as exc:
            if decoded or not text.startswith(("{", "[", '"')):  # plain words, or a JSON string of them
                return None, f"{EXPECTED_ARGUMENTS}, got the text {text!r:.200}"
            return None, f"arguments are not valid JSON ({exc.__class__.__name__}: {exc}): {raw!s:.200}"
    if not isinstance(value, dict):
        return None, f"{EXPECTED_ARGUMENTS}, got {_JSON_KINDS.get(type(value), 'a value')}: {raw!s:.200}"
    return value, None


_JSON_KINDS = {list: "an array", str: "a string", bool: "true or false", int: "a number", float: "a number",
               type(None): "null"}  # fmt: skip


EXPECTED_ARGUMENTS = (
    'arguments must be a JSON object of the tool\'s parameters by name, such as {"query": "Zürich"}'
)


def parse_native(calls: Sequence[RawToolCall]) -> list[ParsedCall]:
    """Native ``tool_calls`` from the response message.

    Each call gets an id unique within the turn: some servers send none or repeat one, and
    the tool messages that answer them must say which call each result belongs to.
    """
    out = []
    used: set[str] = set()
    for index, call in enumerate(calls):
        call_id = call.id
        if not call_id or call_id in used:
            call_id = f"call_{index}"
            while call_id in used:
                call_id += "_"
        used.add(call_id)
        args, err = decode_arguments(call.arguments)
        raw = (
            call.arguments
            if isinstance(call.arguments, str)
            else json.dumps(call.arguments, ensure_ascii=False)
        )
        if not call.name:
            err = err or "tool call has no function name"
        out.append(ParsedCall(call_id, call.name, args, raw or "", err))
    return out


def _call_style(text: str) -> tuple[str, dict[str, Any]] | None:
    """``name(a=1, b="x")`` → (name, kwargs), or None when it is not that shape."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
        return None
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords if kw.arg}
    except (ValueError, SyntaxError, TypeError, RecursionError):
        return None
    return node.func.id, kwargs


def _unfence(body: str) -> str:
    """A code fence (```json … ```) around a call removed; string operations, linear time
    (the regex this replaces took 26 s on a call with 20,000 inner spaces)."""
    body = body.strip()
    if body.startswith("```"):
        body = body[3:]
        for tag in ("json", "python"):
            if body.startswith(tag):
                body = body[len(tag) :]
                break
        body = body.lstrip()
    if body.endswith("```"):
        body = body[:-3].rstrip()
    return body


def _tagged_call(body: str, index: int) -> ParsedCall:
    body = _unfence(body)
    call_id = f"text_call_{index}"
    if not body.startswith(("{", "[")):
        parsed = _call_style(body)
        if parsed is not None:
            return ParsedCall(call_id, parsed[0], parsed[1], body)
    try:
        obj = _lenient_json(body)
    except ValueError as exc:
        return ParsedCall(call_id, "", None, body, f"tool call is not valid JSON ({exc}): {body:.200}")
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return ParsedCall(call_id, "", None, body, 'tool call must be {"name": …, "arguments": {…}}')
    raw_args = obj.get("arguments", obj.get("parameters", {}))
    args, err = decode_arguments(raw_args)
    return ParsedCall(call_id, obj["name"], args, body, err)


def parse_text_calls(text: str, known_tools: Collection[str]) -> list[ParsedCall]:
    """Calls written in the text: tagged blocks first, else ``name(...)`` lines of known tools."""
    if not text:
        return []
    blocks = [m.group(1).strip() for m in _TAGGED.finditer(text) if m.group(1).strip()]
    if blocks:
        return [_tagged_call(b, i) for i, b in enumerate(blocks)]
    bare = _json_call(text, known_tools)
    if bare is not None:
        return [bare]
    calls = []
    for m in _CALL_START.finditer(text):
        if m.group("name") not in known_tools:
            continue
        call_id = f"text_call_{len(calls)}"
        found = _call_at(text, m.start("name"), m.end())
        if found is None:
            line = text[m.start("name") :].split("\n", 1)[0].strip()
            if not line.rstrip("`").endswith(")"):
                continue  # prose that merely starts with a tool's name, not a call
            error = "cannot read this call; write name(arg=value, …) with literal values"
            calls.append(ParsedCall(call_id, m.group("name"), None, line, error))
        else:
            (name, kwargs), raw = found
            calls.append(ParsedCall(call_id, name, kwargs, raw))
    return calls


def _json_call(text: str, known_tools: Collection[str]) -> ParsedCall | None:
    """``{"name": <known tool>, "arguments": {…}}`` ending the reply: the whole reply, or from its
    first code fence or first ``{"name"`` on. At most three decodes of a bounded text: linear."""
    starts = [0, text.find("```"), text.find('{"name"')]
    for start in sorted({s for s in starts if s >= 0}):
        body = _unfence(text[start:])
        if not body.startswith("{") or len(body) > MAX_CALL_CHARS:
            continue
        try:
            obj = _lenient_json(body)
        except ValueError:
            continue
        name = obj.get("name") if isinstance(obj, dict) else None
        if isinstance(name, str) and name in known_tools:
            args, err = decode_arguments(obj.get("arguments", obj.get("parameters", {})))
            return ParsedCall("text_call_0", name, args, body, err)
    return None


def _call_at(text: str, start: int, after_paren: int) -> tuple[tuple[str, dict[str, Any]], str] | None:
    """The ``name(…)`` call starting at ``start``, possibly over several lines, ending its line."""
    for close in (
        i for i, ch in enumerate(text[after_paren : start + MAX_CALL_CHARS], after_paren) if ch == ")"
    ):
        if not _CALL_END.match(text, close + 1):
            continue
        parsed = _call_style(text[start : close + 1])
        if parsed is not None:
            return parsed, text[start : close + 1]
    return None
