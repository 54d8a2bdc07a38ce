"""parsing.twm: Thinking with Map's released reading, case by case (values derived from api_test.py)."""

from __future__ import annotations

import json

import pytest

from geosleuth.core.parsing import MAX_PARSE_CHARS, parse_answer
from geosleuth.core.parsing.twm import _outer_spans_find, _outer_spans_vectorised, geopy_coordinate

ANSWER = {"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}


def twm(text: str) -> tuple[float, float] | None:
    p = parse_answer(text, "strict", "twm")
    return None if p.lat is None or p.lon is None else (p.lat, p.lon)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (json.dumps(ANSWER), (48.85, 2.35)),
        (json.dumps({"answer": ANSWER}), None),  # only outermost spans are candidates
        (json.dumps({"note": "a } here", **ANSWER}), None),  # the brace in the string closes the span
        ('{"lat": 1, "lon": 2, "city": null, "country": 3}', (1.0, 2.0)),  # keys present is enough
        ('{"lat": null, "lon": 2, "city": "x", "country": "y"} ' + json.dumps(ANSWER), None),  # first wins
        ('{"lat": "", "lon": false, "city": "x", "country": "y"}', (0.0, 0.0)),  # float(v or 0.0)
        ('{"lat": [], "lon": {}, "city": "x", "country": "y"}', (0.0, 0.0)),
        ('{"lat": "48.85", "lon": " 2.35 ", "city": "x", "country": "y"}', (48.85, 2.35)),
        ('{"lat": 10, "lon": 190, "city": "x", "country": "y"}', (10.0, -170.0)),  # geopy wraps lon
        ('{"lat": 10, "lon": 540, "city": "x", "country": "y"}', (10.0, -180.0)),
        ('{"lat": 10, "lon": -180, "city": "x", "country": "y"}', (10.0, -180.0)),
        ('{"lat": 90.0000001, "lon": 2.35, "city": "x", "country": "y"}', None),  # geopy raises
        ('{"lat": NaN, "lon": 2.35, "city": "x", "country": "y"}', None),
        ('{"lat": "0x10", "lon": 2.35, "city": "x", "country": "y"}', None),
        ('{"lat": 1e400, "lon": 2.35, "city": "x", "country": "y"}', None),
        ("<tool_response>" + json.dumps(ANSWER) + "</tool_response>", (48.85, 2.35)),  # read as released
        ('}}{"lat": 1, "lon": 2, "city": "x", "country": "y"}', (1.0, 2.0)),  # stray closers skipped
        ('{ {"lat": 1, "lon": 2, "city": "x", "country": "y"}', None),  # never closes
        ('{"\\u006cat": 1, "lon": 2, "city": "x", "country": "y"}', (1.0, 2.0)),  # an escaped key
    ],
)
def test_released_reading(text: str, expected: tuple[float, float] | None) -> None:
    assert twm(text) == expected


def test_reads_the_whole_text_past_the_robust_window() -> None:
    text = json.dumps(ANSWER) + " filler" * (MAX_PARSE_CHARS // 3) + json.dumps({**ANSWER, "lat": 1.0})
    assert len(text) > 2 * MAX_PARSE_CHARS
    assert twm(text) == (48.85, 2.35)  # the released loop takes the first object, at the head


def test_vectorised_spans_equal_the_find_loop() -> None:
    text = ('{"a": {"b": 1}} } {' + json.dumps(ANSWER) + "}{") * 200 + "{" + json.dumps(ANSWER)
    found = [(s, e) for s, e in _outer_spans_find(text) if e - s >= 38]  # vectorised drops short spans
    assert found and found == list(_outer_spans_vectorised(text))
    assert twm(text) is None  # every span holds a nested answer; the last one never closes


@pytest.mark.parametrize(
    ("value", "expected"), [(181.0, -179.0), (-181.0, 179.0), (360.0, 0.0), (900.0, -180.0)]
)
def test_longitude_wraps_as_geopy(value: float, expected: float) -> None:
    from geopy.point import Point

    assert geopy_coordinate(value, "lon") == pytest.approx(expected)
    assert Point(0.0, value).longitude == pytest.approx(expected)  # geopy itself


def test_lone_surrogates_and_many_braces() -> None:
    """A lone surrogate (possible in decoded model text) must not stop the vectorised pass."""
    text = "\ud800" + "{" * 300 + "}" * 300 + json.dumps(ANSWER) + "x" * 5000
    assert twm(text) == (48.85, 2.35)
