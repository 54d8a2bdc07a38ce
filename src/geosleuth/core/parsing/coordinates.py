"""Coordinates in text: numbers, degree/minute/second and hemisphere notation, pairs in prose."""

from __future__ import annotations

import bisect
import math
import re
from typing import Any

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.delimiters import squeeze

_DEG_MARK = r"(?:°|º|˚|deg(?:rees?)?(?![a-z])|d(?![a-z]))"
_MIN_MARK = r"(?:['′’‘]|min(?:utes?)?(?![a-z])|m(?![a-z]))"
_SEC_MARK = r"(?:\"|″|”|''|′′|sec(?:onds?)?(?![a-z])|s(?![a-z]))"
_COORD_BODY = (
    r"(?:(?P<h1>[NSEW]) ?)?(?P<sign>[-+])?(?P<deg>\d{1,3}+(?:[.,]\d++)?+)(?!\d)"
    rf"(?: ?(?P<dmark>{_DEG_MARK})"
    rf"(?: ?(?P<min>\d{{1,2}}+(?:[.,]\d++)?) ?{_MIN_MARK})?"
    rf"(?: ?(?P<sec>\d{{1,2}}+(?:[.,]\d++)?) ?{_SEC_MARK})?)?"
    r"(?(h1)|(?: ?(?P<h2>[NSEWnsew])(?![A-Za-z\d]))?)"  # one hemisphere letter, before or after
)
_COORD_TEXT = re.compile(_COORD_BODY)
# a token is a whole number: "0x10", "12km" or "3rd" hold no coordinate
_COORD_TOKEN = re.compile(rf"(?<![\w.]){_COORD_BODY}(?![A-Za-z0-9_])")
_PAIR_GAP = re.compile(r" ?(?:[,;/] ?|and |\n)?")
_CONTEXT = re.compile(  # words that announce a position (searched just before a pair, same line)
    r"(?i:\b(?:coordinates?|coords?|gps|lat(?:itude)?|lon(?:gitude)?|lng|position|located at)\b"
    r"|\b(?:answer|guess|prediction|location) ?(?:is\b|[:：]))"
)
_KEYED_PAIR = re.compile(  # "lat=48.85, lon=2.35", "latitude 48.85 longitude 2.35"
    r"(?i:\b(?:lat|latitude)\b)\*{0,2} ?[=:]?\*{0,2} ?(?P<a>[^\n]{1,40}?)[ ,;|/\n]{0,3}"
    r"(?i:\b(?:lon|lng|long|longitude)\b)\*{0,2} ?[=:]?\*{0,2} ?(?P<b>[^\n]{1,40}?)(?=$|[ ,;|)\]]|\.(?!\d))",
    re.M,
)
_PAIR_LINE_REST = re.compile(  # what may surround a pair that stands alone on its line
    r"[^\w]{0,12}(?i:(?:(?:my |the )?(?:final |best )?(?:answer|guess|location|prediction))[^\w]{0,6})?"
)
_DIGIT = re.compile(r"\d")
_DIGITS_ONLY = re.compile(r"[-+\d.,° ]+")
_NEWLINE = re.compile(r"\n")


def _coordinate(value: Any, axis: str, strict: bool, recovered: list[str]) -> float | None:
    """One coordinate from a number, a numeric string, or degree / DMS / hemisphere notation.

    Strict reads decimal degrees with a degree mark or hemisphere letter as the whole value
    (SpotAgent's answers write ``Latitude: 22.906847° S``), never minutes and seconds; robust
    reads any notation and also the one coordinate inside a longer text."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        try:
            v = float(value)
        except OverflowError:
            return None
        return v if math.isfinite(v) else None
    text = str(value).strip()[:100]
    try:
        v = float(text)
        return v if math.isfinite(v) else None
    except ValueError:
        pass
    parsed = _decimal_degrees(text, axis) if strict else parse_coordinate_text(text, axis)
    if parsed is not None:
        recovered.append("coordinate_notation")
        return parsed
    if strict:
        return None
    tokens = list(_COORD_TOKEN.finditer(squeeze(text.replace("−", "-"))))
    if len(tokens) != 1:
        return None  # "about 48.85 (±0.01)" is one number; "48.85, 2.35" in one field is not a latitude
    parsed = _token_value(tokens[0], axis)
    if parsed is not None:
        recovered.append("coordinate_in_text")
    return parsed


def _decimal_degrees(text: str, axis: str) -> float | None:
    """Decimal degrees with an optional degree mark and hemisphere letter, nothing else."""
    m = _COORD_TEXT.fullmatch(squeeze(text.replace("−", "-")).strip())
    if m is None or m.group("min") is not None or m.group("sec") is not None:
        return None
    return _token_value(m, axis)


def parse_coordinate_text(text: str, axis: str | None = None) -> float | None:
    """Decimal or degree/minute/second text with optional N/S/E/W before or after; S, W negative.

    ``48.5``, ``48,5``, ``48.5 S``, ``W 3.25``, ``12°30'N``, ``12d30m``, ``22 deg 53 min 53.6 sec S``,
    ``22d53m53.6sS``, ``22º 53' 53.6" S``, ``S22°53.8932'``. ``axis`` ("lat"/"lon") rejects the
    other axis's hemisphere letters. Minutes and seconds must be below 60.
    """
    s = squeeze(text[:100].replace("−", "-").replace("–", "-")).strip().rstrip(".,;")
    m = _COORD_TEXT.fullmatch(s)
    if m is None:
        return None
    return _token_value(m, axis)


def _token_value(m: re.Match[str], axis: str | None) -> float | None:
    """Signed decimal degrees of one coordinate token; None when its parts are impossible."""
    h1, h2 = m.group("h1"), m.group("h2")
    if h1 and h2:
        return None
    hemi = (h1 or h2 or "").upper()
    deg = float(m.group("deg").replace(",", "."))
    minutes = float((m.group("min") or "0").replace(",", "."))
    seconds = float((m.group("sec") or "0").replace(",", "."))
    if minutes >= 60 or seconds >= 60 or (m.group("min") is None and m.group("sec") is not None):
        return None
    value = deg + minutes / 60.0 + seconds / 3600.0
    if m.group("sign") == "-":
        value = -value
    if hemi:
        if (axis == "lat" and hemi in "EW") or (axis == "lon" and hemi in "NS"):
            return None
        if hemi in "SW":
            value = -abs(value)
    return value if math.isfinite(value) else None


def _marked(m: re.Match[str]) -> bool:
    """A token that says it is a coordinate: degrees with minutes, a decimal with a degree mark,
    or a hemisphere letter on a decimal or degree value (``N 5, E 7`` is a platform and
    ``20°, 25°`` two temperatures; ``S 33.87, E 151.21`` and ``48.85°, 2.35°`` are positions)."""
    mark = m.group("dmark")
    if mark is not None and m.group("min") is not None:
        return True
    degree = mark is not None and (mark[0] != "d" or mark.startswith("deg"))
    hemi = m.group("h1") or (m.group("h2") if m.group("h2") and m.group("h2").isupper() else None)
    if hemi:
        return degree or _is_decimal(m)
    return degree and _is_decimal(m)


def _is_decimal(m: re.Match[str]) -> bool:
    deg = m.group("deg")
    return "." in deg or "," in deg


MAX_PAIR_TOKENS = 1024
"""Numbers examined for a free-text pair, from the end (bounded work on a text of numbers)."""


def _free_coordinates(region: str, in_block: bool) -> _Found | None:
    """The last ``lat, lon`` pair with a coordinate context (see the module docstring)."""
    if _DIGIT.search(region) is None:
        return None
    text = region.replace("−", "-")
    keyed = _keyed_pair(text)
    if keyed is not None:
        return keyed
    tokens = list(_COORD_TOKEN.finditer(text))[-MAX_PAIR_TOKENS:]  # the last pair wins: read from the end
    if len(tokens) < 2:
        return None
    breaks = [m.start() for m in _NEWLINE.finditer(text)]
    last_line_start = text.rfind("\n", 0, len(text.rstrip())) + 1
    for a, b in zip(reversed(tokens[:-1]), reversed(tokens[1:]), strict=True):
        if _PAIR_GAP.fullmatch(text, a.end(), b.start()) is None:
            continue
        found = _pair(a, b)
        if found is None:
            continue
        if _marked(a) or _marked(b):
            return found
        if not (_is_decimal(a) or _is_decimal(b)):
            continue  # two bare integers are more often a count or a year than a position
        i = bisect.bisect_left(breaks, a.start())
        line_start = breaks[i - 1] + 1 if i else 0
        if _CONTEXT.search(text, max(line_start, a.start() - 80), a.start()):
            return found
        j = bisect.bisect_left(breaks, b.end())
        line_end = breaks[j] if j < len(breaks) else len(text)
        if (in_block or line_start >= last_line_start) and line_end - line_start <= 120:
            rest = text[line_start : a.start()] + " " + text[b.end() : line_end]
            if _PAIR_LINE_REST.fullmatch(rest):
                return found
    return None


def _pair(a: re.Match[str], b: re.Match[str]) -> _Found | None:
    """Two adjacent tokens as (lat, lon); hemisphere letters may put longitude first."""
    ha = (a.group("h1") or a.group("h2") or "").upper()
    hb = (b.group("h1") or b.group("h2") or "").upper()
    if ha in ("E", "W") and hb in ("N", "S"):
        a, b, ha, hb = b, a, hb, ha
    if ha in ("E", "W") or hb in ("N", "S"):
        return None
    lat, lon = _token_value(a, "lat"), _token_value(b, "lon")
    if lat is None or lon is None or abs(lat) > 180 or abs(lon) > 180:
        return None
    note = "coordinate_notation" if a.group("dmark") or b.group("dmark") else "free_text_coordinates"
    return _Found(lat=lat, lon=lon, fmt="free_coordinates", recovered=[note])


def _keyed_pair(text: str) -> _Found | None:
    """The last ``lat … lon …`` pair written with keys in prose (``lat=1.5, lon=2.5``)."""
    if not _CONTEXT.search(text):
        return None
    last: _Found | None = None
    for m in _KEYED_PAIR.finditer(text):
        a = _COORD_TEXT.fullmatch(m.group("a").strip().rstrip(",;"))
        b = _COORD_TEXT.fullmatch(m.group("b").strip().rstrip(",;"))
        if a is None or b is None:
            continue
        lat, lon = _token_value(a, "lat"), _token_value(b, "lon")
        if lat is not None and lon is not None and abs(lat) <= 180 and abs(lon) <= 180:
            last = _Found(
                lat=lat, lon=lon, fmt="free_coordinates", recovered=["free_text_coordinates"], labeled=True
            )
    return last


MAX_TEXT_PAIRS = 256
"""At most this many pairs are read from one text (bounded work on any tool output)."""


def coordinate_pairs(text: str, *, any_pair: bool = False) -> list[tuple[int, float, float]]:
    """Every (offset, lat, lon) a text states, in text order, at most `MAX_TEXT_PAIRS`: keyed pairs
    (``lat=1.5, lon=2.5``) and adjacent number pairs (``48.8584, 2.2945``, ``48°51′N 2°17′E``).

    Read as claims (grounding a reasoning), an adjacent pair needs a decimal or a degree or
    hemisphere mark on one of its numbers, and both values in range. ``any_pair`` screens tool
    output instead (the leak guard, which also tries a page's ``lon, lat`` order): every adjacent
    pair, however the text is framed, and no range check. At most `MAX_PAIR_TOKENS` numbers are
    examined either way."""
    if _DIGIT.search(text) is None:
        return []
    text = text.replace("−", "-")
    found: list[tuple[int, float, float]] = []
    keyed: list[tuple[int, int]] = []
    at = 0
    while (m := _KEYED_PAIR.search(text, at)) is not None:
        keyed.append((m.start(), m.end()))
        a = _COORD_TEXT.fullmatch(m.group("a").strip().rstrip(",;"))
        b = _COORD_TEXT.fullmatch(m.group("b").strip().rstrip(",;"))
        lat = _token_value(a, "lat") if a is not None else None
        lon = _token_value(b, "lon") if b is not None else None
        if lat is not None and lon is not None:
            found.append((m.start(), lat, lon))
        at = m.end() if lat is not None and lon is not None else m.start() + 1  # retry inside a miss
    tokens = list(_COORD_TOKEN.finditer(text))[:MAX_PAIR_TOKENS]
    for a, b in zip(tokens, tokens[1:], strict=False):
        if _PAIR_GAP.fullmatch(text, a.end(), b.start()) is None:
            continue
        if not any_pair and (
            any(s <= a.start() < e for s, e in keyed)
            or not (_marked(a) or _marked(b) or _is_decimal(a) or _is_decimal(b))
        ):
            continue
        pair = _pair(a, b)
        if pair is not None and pair.lat is not None and pair.lon is not None:
            found.append((a.start(), pair.lat, pair.lon))
    found.sort()
    if not any_pair:
        found = [(at, lat, lon) for at, lat, lon in found if abs(lat) <= 90 and abs(lon) <= 180]
    return found[:MAX_TEXT_PAIRS]
