"""ccmdi's GeoBench reading of an answer (``scripts/parser.py``: ``parse_response``).

The released regex wants three lines, in this order, anywhere in the reply::

    country: <name>        (or Country; the key may be **bold**, the value wrapped in * or **)
    lat: <number>          (or Lat; [-+]digits[.digits], nothing after it on the line)
    lng: <number>          (or Lng)

with any text between them; the name holds no comma (and may sit on a later line when the key's
line has none). A latitude outside [-90, 90] or a longitude outside [-180, 180] is a refusal.

The released pattern is one ``re.search`` whose lazy gaps make it quadratic on long replies (each
country line that fails rescans the rest of the text, and so does each latitude line without a
longitude after it). Here it runs once, anchored at the first country line whose country part
can match (a later one cannot succeed where the first failed: the text after it is a subset), on
the text up to the longitude line its match can reach at the latest: the first latitude, then
longitude, line after the earliest and after the latest end its country part can have. Within
that window the released pattern decides, so the groups are the ones it would give.

Bounds on untrusted text (the released code has none; its optional asterisk wrappers around a
lazy name backtrack in cubic time on a line of asterisks): the reply is cut to its last
``MAX_PARSE_CHARS`` as every parser here does, a run of blanks within a line keeps its first
three characters, a run of asterisks its first four, and a line longer than
:data:`MAX_LINE_CHARS` characters is no answer line (real ones are a few dozen). Only a name
with such runs inside it reads differently.
"""

from __future__ import annotations

import re

from geosleuth.core.parsing.base import _Found

MAX_LINE_CHARS = 200
_STARS = re.compile(r"\*{5,}")
_BLANKS = re.compile(r"[^\S\n]{4,}")
_FLAGS = re.MULTILINE | re.DOTALL
COUNTRY = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:country|Country)(?:\*\*)?:\s*(\*+)?\s*([^,\r\n]+?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)
KEY = re.compile(r"(?:^|\n)(?:\*\*)?(?:country|Country)(?:\*\*)?:", _FLAGS)
RELEASED = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:country|Country)(?:\*\*)?:\s*(\*+)?\s*([^,\r\n]+?)\s*(\*+)?\s*(?:\n|$)"
    r".*?"
    r"(?:^|\n)(?:\*\*)?(?:lat|Lat)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)"
    r".*?"
    r"(?:^|\n)(?:\*\*)?(?:lng|Lng)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)",
    _FLAGS,
)
_SPANNED = re.compile(r"[^\s*]")
LAT = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:lat|Lat)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)
LNG = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:lng|Lng)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)


def _bounded_lines(text: str) -> str:
    """The text with blank runs cut to three characters, asterisk runs to four, and overlong lines
    emptied (their newlines kept)."""
    lines = _STARS.sub("****", _BLANKS.sub(lambda m: m.group()[:3], text)).split("\n")
    return "\n".join("" if len(line) > MAX_LINE_CHARS else line for line in lines)


def _line_end(work: str, position: int) -> int:
    """Just past the newline ending the line at ``position`` (the text's end on the last line)."""
    newline = work.find("\n", position)
    return len(work) if newline < 0 else newline + 1


def _reach(work: str, end: int) -> int | None:
    """The end of the first longitude line after the first latitude line after ``end``."""
    lat = LAT.search(work, end)
    lng = LNG.search(work, lat.end()) if lat is not None else None
    return None if lng is None else lng.end()


def _window(work: str, key: re.Match[str]) -> int | None:
    """How far the released match from ``key`` can reach, or None when it cannot succeed.

    The country part ends after the key's line (its name on that line) or, when that line holds
    only blanks and asterisks, at the latest after the first line holding anything else.
    """
    early = _line_end(work, key.end())
    late = early
    if _SPANNED.search(work, key.end(), early - 1 if work[early - 1 : early] == "\n" else early) is None:
        later = _SPANNED.search(work, early)
        late = _line_end(work, later.start()) if later is not None else len(work)
    reaches = [r for r in (_reach(work, early), _reach(work, late)) if r is not None]
    return max(reaches) if reaches else None


def released_geobench(text: str) -> _Found | None:
    """The country, lat and lng GeoBench's ``parse_response`` reads, or None where it raises."""
    work = _bounded_lines(text)
    key = next((k for k in KEY.finditer(work) if COUNTRY.match(work, k.start())), None)
    window = _window(work, key) if key is not None else None
    if key is None or window is None:
        return None
    match = RELEASED.match(work[:window], key.start())
    if match is None:
        return None
    lat_value, lng_value = float(match.group(5).strip()), float(match.group(8).strip())
    if not (-90.0 <= lat_value <= 90.0 and -180.0 <= lng_value <= 180.0):
        return None
    found = _Found(lat=lat_value, lon=lng_value, fields={"country": match.group(2).strip()}, fmt="geobench")
    found.labeled = True
    return found
