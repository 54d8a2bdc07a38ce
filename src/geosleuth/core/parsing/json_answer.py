"""JSON answers: objects found in one pass over the structural characters, tolerant reading."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.delimiters import squeeze
from geosleuth.core.parsing.fields import _from_mapping

_JSON_TOKEN = re.compile(r'\\.|[{}"\n]', re.S)
_MAX_JSON_DEPTH = 32  # deeper objects are never answers; bounds the decoding work
_DIRECT_DECODE_BRACES = 64  # up to this many "{", decode at each (the released twm loop) directly
_DECODER = json.JSONDecoder()


def _decode(text: str, start: int) -> tuple[Any, int] | None:
    """The JSON value at ``start`` and its end, or ``None`` when it does not parse (any depth, size)."""
    try:
        return _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError):
        return None


def _balanced_end(text: str, start: int) -> tuple[int, int]:
    """End of the ``{...}`` opened at ``start`` and the braces left open at the end of the text.

    One pass over the structural characters only. A quote ends at the next quote or newline
    (a model's broken JSON must not swallow the rest of the text). Returns ``(-1, depth)``
    when the text ends first.
    """
    depth, in_quote = 0, False
    for m in _JSON_TOKEN.finditer(text, start):
        ch = m.group(0)
        if in_quote:
            in_quote = ch not in ('"', "\n")
        elif ch == '"':
            in_quote = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return m.end(), 0
    return -1, depth


def _outer_objects(text: str) -> Iterator[tuple[int, int, int, Any]]:
    """``(start, end, open_depth, value)`` of each outermost ``{...}`` span in order.

    A span that decodes as JSON is taken whole by the C decoder; otherwise its balanced end
    is found by :func:`_balanced_end` and ``value`` is ``None``. An unclosed span has ``end=-1``.
    """
    pos = 0
    while (i := text.find("{", pos)) >= 0:
        hit = _decode(text, i)
        if hit is not None:
            yield i, hit[1], 0, hit[0]
            pos = hit[1]
            continue
        end, depth = _balanced_end(text, i)
        yield i, end, depth, None
        if end < 0:
            return
        pos = end


def _all_brace_starts(text: str) -> Iterator[int]:
    """Positions of every ``{`` that opens a balanced span no deeper than :data:`_MAX_JSON_DEPTH`.

    Few braces: every ``{`` (the released twm loop decodes from each). Many: one stack pass
    over the structural characters keeps the work linear whatever the nesting.
    """
    if text.count("{") <= _DIRECT_DECODE_BRACES:
        pos = text.find("{")
        while pos >= 0:
            yield pos
            pos = text.find("{", pos + 1)
        return
    starts: list[int] = []
    stack: list[int] = []
    in_quote = False
    for m in _JSON_TOKEN.finditer(text):
        ch = m.group(0)
        if in_quote:
            in_quote = ch not in ('"', "\n")
        elif ch == '"':
            in_quote = bool(stack)
        elif ch == "{":
            stack.append(m.start())
        elif ch == "}" and stack:
            start = stack.pop()
            if len(stack) < _MAX_JSON_DEPTH:
                starts.append(start)
    starts.sort()
    yield from starts


def _json_objects(text: str) -> Iterator[Any]:
    """JSON values starting at a ``{`` (nested ones included), in text order."""
    for start in _all_brace_starts(text):
        hit = _decode(text, start)
        if hit is not None:
            yield hit[0]


def _robust_json(region: str) -> _Found | None:
    """Last object with coordinates; fenced, tolerant (unquoted strings, single quotes)."""
    if "{" not in region:
        return None
    found: list[_Found] = []
    for start, end, depth, obj in _outer_objects(region):
        note: list[str] = []
        if obj is None:  # squeezed, it may decode (a tab or an odd blank in it) or read loosely
            span = squeeze(region[start:end] if end > 0 else region[start:] + "}" * depth)
            hit = _decode(span, 0)
            obj, note = (hit[0], []) if hit is not None else (_loose_mapping(span), ["tolerant_json"])
        if isinstance(obj, dict) and obj:
            item = _from_mapping(_flatten(obj), strict=False)
            if item.useful:
                item.fmt = "json"
                item.recovered = note + item.recovered
                found.append(item)
    if not found:
        return None
    with_coords = [f for f in found if f.has_coords]
    pick = (with_coords or found)[-1]
    if len(found) > 1:
        pick.recovered.append("several_objects_last_wins")
    return pick


_LOOSE_PAIR = re.compile(
    r"""["']?(?P<key>[A-Za-z_\u4e00-\u9fff][\w\u4e00-\u9fff/ ]{0,30}+)["']? ?: ?"""
    r"""(?P<val>"(?:[^"\\\n]|\\.){0,500}+"|'[^'\n]{0,500}+'|\[[^\]]{0,500}+\]|[^,\n}]{1,500}+)"""
)


def _loose_mapping(text: str) -> dict[str, Any]:
    """Key/value pairs from JSON-like text that json.loads rejects."""
    out: dict[str, Any] = {}
    body = text.strip()[1:-1]
    for m in _LOOSE_PAIR.finditer(body):
        key, val = m.group("key").strip(), m.group("val").strip()
        if val[:1] in "\"'" and val[-1:] == val[:1] and len(val) >= 2:
            val = val[1:-1]
        elif val.startswith("["):
            parsed = _decode(val, 0)
            if parsed is not None:
                out[key] = parsed[0]
                continue
        out[key] = val.rstrip(",").strip()
    return out


def _flatten(obj: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Lift nested ``{"location": {...}}`` / ``{"answer": {...}}`` mappings to the top.

    A mapping's own keys win over nested ones; among nested mappings the first wins.
    """
    flat: dict[str, Any] = {}
    for k, v in obj.items():
        if isinstance(v, dict):
            if depth < _MAX_JSON_DEPTH:
                for k2, v2 in _flatten(v, depth + 1).items():
                    flat.setdefault(k2, v2)
        else:
            flat[k] = v
    return flat
