"""Tagged key-value answers: ``Country: …`` / ``Latitude: …`` lines, one per line or inline."""

from __future__ import annotations

import re

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.fields import _from_mapping, field_key

_KEY_NAMES = (
    r"(?:country|city|region|province/state|state/province|province_or_state|state_or_province"
    r"|state|province|admin1|county|district|town|street|address|place|location"
    r"|latitude|longitude|lat|lon|lng|confidence|choice)"
)
_ANSWER_KEYS = rf"\*{{0,2}}{_KEY_NAMES}\*{{0,2}}[ \t]?[:：]"
ANSWER_LINE = re.compile(  # one ``Key: value`` line; key and value may carry ``**`` (callers strip)
    r"^[^\S\n]*+(?:[-*•][^\S\n]*+)?(?P<key>[^:：\s][^:：\n]{0,39}+)[:：][^\S\n]*+(?P<val>\S[^\n]*+)", re.M
)
INLINE_KEY = re.compile(rf"[;,|；，][ \t]*+(?={_ANSWER_KEYS})", re.I)  # separator before the next key
_SPACED_KEY = re.compile(rf"(?<=\S)[ \t]++(?={_ANSWER_KEYS})", re.I)  # "**Latitude:** 1 **Longitude:** 2"
_KEY_LINE = re.compile(rf"[ \t]*+(?:[-•][ \t]*+)?{_ANSWER_KEYS}", re.I)
_EMPTY_KEY_LINE = re.compile(r"[^\S\n]*+(?:[-*•][^\S\n]*+)?(?P<key>[^:：\s][^:：\n]{0,39}+)[:：][\s*]*+$")


MAX_KEY_LINES = 2048
"""Lines read for ``Key: value`` pairs; an answer has a dozen, a hostile text hundreds of thousands."""


def _key_values(region: str) -> dict[str, str]:
    """``key -> value`` from ``Key: value`` lines; first occurrence of a key wins.

    ``Country: X, City: Y`` and ``**Latitude:** 1 **Longitude:** 2`` are split into lines; a
    key whose value is on the next line (``City:\\nParis``) takes that line. Only the first
    :data:`MAX_KEY_LINES` lines are read (bounded work on a hostile answer).
    """
    if ":" in region or "：" in region:
        region = INLINE_KEY.sub("\n", region)
        region = "\n".join(
            _SPACED_KEY.sub("\n", line) if _KEY_LINE.match(line) else line for line in _lines(region)
        )
    pairs: dict[str, str] = {}
    lines = _lines(region)
    for i, line in enumerate(lines):
        if ":" not in line and "：" not in line:
            continue
        m = ANSWER_LINE.match(line)
        if m is not None:
            key, val = field_key(m.group("key")), m.group("val").strip().strip("*").strip()
        else:
            e = _EMPTY_KEY_LINE.match(line)
            nxt = lines[i + 1].strip() if i + 1 < len(lines) else ""
            if e is None or not nxt or ANSWER_LINE.match(nxt) or len(nxt) > 120:
                continue
            key, val = field_key(e.group("key")), nxt.strip("*").strip()
        if val and key not in pairs:
            pairs[key] = val
    return pairs


def _lines(region: str) -> list[str]:
    """The first :data:`MAX_KEY_LINES` lines."""
    lines = region.split("\n", MAX_KEY_LINES)
    if len(lines) > MAX_KEY_LINES:
        del lines[MAX_KEY_LINES:]
    return lines


def _from_lines(region: str, strict: bool) -> _Found | None:
    """``Country: …`` / ``City: …`` / ``Latitude: …`` / ``Longitude: …`` lines (any order)."""
    if ":" not in region and "：" not in region:
        return None
    pairs = _key_values(region)
    if not pairs:
        return None
    found = _from_mapping(pairs, strict=strict)
    if not found.useful:
        return None
    found.fmt = "answer_lines"
    return found
