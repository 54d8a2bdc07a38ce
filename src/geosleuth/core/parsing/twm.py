"""Thinking with Map, as released: ``api_evaluation/api_test.py`` of AMAP-ML/Thinking-with-Map.

The released loop reads the **whole** text (tool responses included), cuts it into its
outermost ``{…}`` spans by counting braces (quotes are not special; a ``}`` with nothing
open is skipped; an unclosed span is dropped), ``json.loads`` each span, and takes the first
that is an object with all of ``lat``, ``lon``, ``city`` and ``country``. No other object is
tried after it, whatever its values. geopy's ``Point`` then reads each coordinate as
``float(value or 0.0)`` (so ``""``, ``0``, ``false``, ``[]``, ``{}`` are 0), rejects a
non-finite value or ``|lat| > 90`` (the released code counts the row as a miss), and wraps a
longitude beyond ±180 into ``[-180, 180)``. A nested answer (``{"answer": {"lat": …}}``) or a
brace inside a string therefore defeats it: that is the released number, and ``default``
reads such answers (see docs/evaluation.md).

Bounded work: braces are located and paired in one vectorised pass when there are many, and
a span shorter than the shortest object with the four keys (38 characters) or, written
without a backslash, lacking one of the four quoted keys, cannot match and is never decoded;
the spans are disjoint, so decoding is linear in the text.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from geosleuth.core.parsing.base import _Found

TWM_KEYS = ("lat", "lon", "city", "country")
MAX_RELEASED_CHARS = 32 * 1024 * 1024
"""Longest text read as released (the scorer's own line limit); a longer one keeps its head."""

_MIN_MATCH_CHARS = len('{"lat":0,"lon":0,"city":0,"country":0}')
_DECODER = json.JSONDecoder()
_PRECHECK_CHARS = 16_384  # longer texts are first checked for the four keys as a whole
_VECTOR_BRACES = 256  # more openers than this: pair braces with NumPy instead of str.find


def outer_spans(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of each outermost brace span, as the released ``extract_all_json_objects``."""
    if len(text) > _VECTOR_BRACES * 16 and text.count("{") > _VECTOR_BRACES:
        yield from _outer_spans_vectorised(text)
    else:
        yield from _outer_spans_find(text)


def _outer_spans_find(text: str) -> Iterator[tuple[int, int]]:
    """The spans by ``str.find``: each brace is found once."""
    next_open = text.find("{")
    while next_open >= 0:
        start, depth = next_open, 1
        next_open, next_close = text.find("{", start + 1), text.find("}", start + 1)
        while True:
            if next_close < 0:
                return  # this span never closes; the released loop yields nothing more
            if 0 <= next_open < next_close:
                depth += 1
                next_open = text.find("{", next_open + 1)
            else:
                depth -= 1
                end = next_close + 1
                next_close = text.find("}", end)
                if depth == 0:
                    break
        yield start, end  # next_open now lies past the span: the next outermost start


def _outer_spans_vectorised(text: str) -> Iterator[tuple[int, int]]:
    """The same spans: the depth that never goes below 0 is ``S - min(0, running min of S)``."""
    import numpy as np

    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    pos = np.flatnonzero((codes == 0x7B) | (codes == 0x7D))
    step = np.where(codes[pos] == 0x7B, 1, -1).astype(np.int64)
    total = np.cumsum(step)
    depth_after = total - np.minimum(np.minimum.accumulate(total), 0)
    depth_before = np.concatenate(([0], depth_after[:-1]))
    starts = pos[(step == 1) & (depth_before == 0)]
    ends = pos[(step == -1) & (depth_before == 1)] + 1
    starts = starts[: len(ends)]  # a last span left open is dropped
    keep = ends - starts >= _MIN_MATCH_CHARS
    yield from zip(starts[keep].tolist(), ends[keep].tolist(), strict=True)


def released_twm_object(text: str) -> dict[str, Any] | None:
    """The object the released ``find_coords_json`` returns, or ``None``."""
    text = text[:MAX_RELEASED_CHARS]
    if "}" not in text:
        return None  # no span closes
    if len(text) > _PRECHECK_CHARS and "\\" not in text and not _may_hold_keys(text):
        return None  # a long text where no object can hold the four keys
    for start, end in outer_spans(text):
        if end - start < _MIN_MATCH_CHARS:
            continue
        cand = text[start:end]
        if "\\" not in cand and not _may_hold_keys(cand):
            continue  # without escapes a key is written literally: this span cannot match
        try:  # json.loads(cand): the span is exactly one value, so raw_decode must end at its end
            obj, stop = _DECODER.raw_decode(cand)
        except (ValueError, RecursionError):  # released: JSONDecodeError skips; deep nesting crashes it
            continue
        if stop == len(cand) and "lat" in obj and "lon" in obj and "city" in obj and "country" in obj:
            return obj
    return None


def _may_hold_keys(text: str) -> bool:
    return '"lat"' in text and '"lon"' in text and '"city"' in text and '"country"' in text


def geopy_coordinate(value: Any, axis: str) -> float | None:
    """``value`` as geopy's ``Point`` reads it; ``None`` where geopy raises (the row is a miss).

    A latitude beyond ±90 is returned as is so the caller records it as out of range.
    """
    try:
        v = float(value or 0.0)
    except (TypeError, ValueError, OverflowError):
        return None
    if v - v != 0.0:  # inf or nan (math.isfinite, cheaper)
        return None
    return _wrap_longitude(v) if axis == "lon" and abs(v) > 180 else v


def _wrap_longitude(v: float) -> float:
    """geopy's ``_normalize_angle(v, 180)``: into ``[-180, 180)``."""
    wrapped = math.fmod(v, 360.0) or 0.0
    if wrapped < -180:
        return wrapped + 360.0
    if wrapped >= 180:
        return wrapped - 360.0
    return wrapped


def released_twm(text: str) -> _Found | None:
    """Thinking-with-Map's released reading of one answer (see the module docstring)."""
    obj = released_twm_object(text)
    if obj is None:
        return None
    fields = {k: str(obj[k]) for k in ("city", "country") if obj[k] is not None}
    found = _Found(fields=fields, fmt="json")
    if obj["lat"] is None or obj["lon"] is None:
        return found
    lat, lon = geopy_coordinate(obj["lat"], "lat"), geopy_coordinate(obj["lon"], "lat")
    if lat is not None and lon is not None:
        found.lat, found.lon = lat, lon
        if abs(lon) > 180 and abs(lat) <= 90:
            found.lon = _wrap_longitude(lon)
            found.recovered.append("longitude_wrapped_as_geopy")
    return found
