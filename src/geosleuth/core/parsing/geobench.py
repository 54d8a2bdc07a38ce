"""ccmdi's GeoBench reading of an answer (``scripts/parser.py``: ``parse_response``).

The released regex wants three lines, in this order, anywhere in the reply::

    country: <name>        (or Country; the key may be **bold**, the value wrapped in * or **)
    lat: <number>          (or Lat; [-+]digits[.digits], nothing after it on the line)
    lng: <number>          (or Lng)

with any text between them; the name holds no comma. A latitude outside [-90, 90] or a longitude
outside [-180, 180] is a refusal. The regex is one ``re.search`` whose lazy gaps make it quadratic
on long replies; it is split here into three searches, each starting where the previous part
ended, which finds the same match: only the first country line can start one (any later line has
less text after it), and only the first latitude line after it.

Bounds on untrusted text (the released code has none; its optional asterisk wrappers around a
lazy name backtrack in cubic time on a line of asterisks): the reply is cut to its last
``MAX_PARSE_CHARS`` as every parser here does, blank runs are squeezed (a name's inner spaces
become one), a run of more than four asterisks counts as four, and a line longer than
:data:`MAX_LINE_CHARS` characters is no answer line (real ones are a few dozen).
"""

from __future__ import annotations

import re

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.delimiters import squeeze

MAX_LINE_CHARS = 200
_STARS = re.compile(r"\*{5,}")
_FLAGS = re.MULTILINE | re.DOTALL
COUNTRY = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:country|Country)(?:\*\*)?:\s*(\*+)?\s*([^,\r\n]+?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)
LAT = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:lat|Lat)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)
LNG = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:lng|Lng)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)", _FLAGS
)


def _bounded_lines(text: str) -> str:
    """The text squeezed, asterisk runs cut to four, overlong lines emptied (their newlines kept)."""
    lines = _STARS.sub("****", squeeze(text)).split("\n")
    return "\n".join("" if len(line) > MAX_LINE_CHARS else line for line in lines)


def released_geobench(text: str) -> _Found | None:
    """The country, lat and lng GeoBench's ``parse_response`` reads, or None where it raises."""
    work = _bounded_lines(text)
    country = COUNTRY.search(work)
    if country is None:
        return None
    lat = LAT.search(work, country.end())
    if lat is None:
        return None
    lng = LNG.search(work, lat.end())
    if lng is None:
        return None
    lat_value, lng_value = float(lat.group(2).strip()), float(lng.group(2).strip())
    if not (-90.0 <= lat_value <= 90.0 and -180.0 <= lng_value <= 180.0):
        return None
    found = _Found(lat=lat_value, lon=lng_value, fields={"country": country.group(2).strip()}, fmt="geobench")
    found.labeled = True
    return found
