"""JSON answers: objects found in one pass over the structural characters, tolerant reading."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.delimiters import squeeze
from geosleuth.core.parsing.fields import _PAIR_KEYS, LAT_KEYS, LON_KEYS, _from_mapping, field_key

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


_DIRECT_DECODE_OFFSET = 16_384
_DIRECT_DECODE_FAILURES = 64
"""A failed decode in place builds an error whose line number costs a count over everything
before it. So in place is used near the start, or until this many decodes have failed; after
that a span is cut to its balanced end first and decoded alone (a valid object ends exactly
there, so the result is the same)."""


def _decode_span(text: str, start: int, end: int) -> tuple[Any, int] | None:
    """:func:`_decode` of ``text[start:end]``, with the end mapped back into ``text``."""
    hit = _decode(text[start:end], 0)
    return None if hit is None else (hit[0], start + hit[1])


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
    pos = failures = 0
    while (i := text.find("{", pos)) >= 0:
        if i <= _DIRECT_DECODE_OFFSET or failures < _DIRECT_DECODE_FAILURES:
            hit = _decode(text, i)
            failures += hit is None
            end, depth = (hit[1], 0) if hit is not None else _balanced_end(text, i)
        else:
            end, depth = _balanced_end(text, i)
            hit = _decode_span(text, i, end) if end > 0 else None
        yield i, end, depth, (hit[0] if hit is not None else None)
        if end < 0:
            return
        pos = end


def _all_brace_starts(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every ``{`` that opens a balanced span no deeper than :data:`_MAX_JSON_DEPTH`.

    Few braces: every ``{`` (the released twm loop decodes from each), ``end`` -1 (decode in
    place). Many: one stack pass over the structural characters keeps the work linear whatever
    the nesting, and gives each span's end, so each is decoded alone (see :data:`_DIRECT_DECODE_OFFSET`).
    """
    if text.count("{") <= _DIRECT_DECODE_BRACES:
        pos = text.find("{")
        while pos >= 0:
            yield pos, -1
            pos = text.find("{", pos + 1)
        return
    spans: list[tuple[int, int]] = []
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
                spans.append((start, m.end()))
    spans.sort()
    yield from spans


def _json_objects(text: str) -> Iterator[Any]:
    """JSON values starting at a ``{`` (nested ones included), in text order."""
    for start, end in _all_brace_starts(text):
        hit = _decode(text, start) if end < 0 else _decode_span(text, start, end)
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
    r"""(?P<val>"(?:[^"\\\n]|\\.){0,500}+"|'[^'\n]{0,500}+'|\[[^\]]{0,500}+\]|[^,\n{}]{1,500}+)"""
)
_BRACE = re.compile(r"[{}]")


def _loose_mapping(text: str) -> dict[str, Any]:
    """Key/value pairs from JSON-like text that json.loads rejects, one mapping per object.

    A pair belongs to the innermost ``{`` open before it; the pairs of each nested object form
    their own mapping under the top one, so :func:`_flatten` never joins one object's
    latitude to another's longitude.
    """
    top: dict[str, Any] = {}
    body = text.strip()[1:-1]
    pairs = list(_LOOSE_PAIR.finditer(body))
    # one pair cannot mix objects: its nesting is not worth a pass over every brace before it
    braces = _BRACE.finditer(body) if len(pairs) > 1 and "{" in body else iter(())
    brace = next(braces, None)
    open_at: list[int] = []  # positions of the braces open before the current pair
    for m in pairs:
        while brace is not None and brace.start() < m.start():
            if brace.group(0) == "{":
                open_at.append(brace.start())
            elif open_at:
                open_at.pop()
            brace = next(braces, None)
        out = top.setdefault(f"\x00{open_at[-1]}", {}) if open_at else top
        key, val = m.group("key").strip(), m.group("val").strip()
        if val[:1] in "\"'" and val[-1:] == val[:1] and len(val) >= 2:
            val = val[1:-1]
        elif val.startswith("["):
            parsed = _decode(val, 0)
            if parsed is not None:
                out[key] = parsed[0]
                continue
        out[key] = val.rstrip(",").strip()
    return top


def _flatten(obj: dict[str, Any], depth: int = 0) -> dict[str, Any]:
    """Lift nested ``{"location": {...}}`` / ``{"answer": {...}}`` mappings to the top.

    A mapping's own keys win over nested ones; among nested mappings the first wins. The
    coordinates come from one object: the mapping's own when it has a latitude and a longitude
    (or a coordinate pair), else the first nested mapping that has them; any other object's
    coordinate keys are dropped.
    """
    for v in obj.values():
        if isinstance(v, dict):
            break
    else:
        return obj  # the common answer is flat already (callers read it, never change it)
    flat: dict[str, Any] = {}
    nested: list[dict[str, Any]] = []
    for k, v in obj.items():
        if isinstance(v, dict):
            if depth < _MAX_JSON_DEPTH:
                nested.append(_flatten(v, depth + 1))
        else:
            flat[k] = v
    if not nested:
        return flat
    source = None if _has_position(flat) else next((s for s in nested if _has_position(s)), None)
    if source is not None:
        flat = {k: v for k, v in flat.items() if not _is_position_key(k)}
    for sub in nested:
        for k2, v2 in sub.items():
            if sub is source or not _is_position_key(k2):
                flat.setdefault(k2, v2)
    return flat


def _is_position_key(key: str) -> bool:
    return field_key(key) in _POSITION_KEYS


def _has_position(mapping: dict[str, Any]) -> bool:
    keys = {field_key(k) for k in mapping}
    return bool(keys & _PAIR_KEY_SET) or bool(keys & _LAT_KEY_SET and keys & _LON_KEY_SET)


_LAT_KEY_SET = frozenset(LAT_KEYS)
_LON_KEY_SET = frozenset(LON_KEYS)
_PAIR_KEY_SET = frozenset(_PAIR_KEYS)
_POSITION_KEYS = _LAT_KEY_SET | _LON_KEY_SET | _PAIR_KEY_SET
