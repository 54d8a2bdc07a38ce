"""parsing.json_answer (robust): one object per coordinate, labeled values never swapped, bounded work."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.parsing import parse_answer

coord = st.floats(min_value=-89.0, max_value=89.0, allow_nan=False).map(lambda v: round(v, 4))
name = st.sampled_from(["location", "answer", "a", "b", "guess", "place"])


@given(lat=coord, lon=coord, k1=name, k2=name, broken=st.booleans())
@settings(max_examples=60, deadline=None)
def test_never_joins_two_objects_keys(lat: float, lon: float, k1: str, k2: str, broken: bool) -> None:
    """A latitude in one object and a longitude in another is no position, valid JSON or not."""
    if k1 == k2:
        k2 += "2"
    text = f'{{"{k1}": {{"lat": {lat}}}, "{k2}": {{"lon": {lon}}}}}'
    if broken:
        text = text.replace(f'"{k1}"', k1)  # unquoted key: read by the tolerant reader
    p = parse_answer(text)
    assert p.lat is None and p.lon is None, text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"lat": 1.5, "city": "Paris"\nsome text {"lon": 2.5}', (None, None)),  # unclosed, then another
        ('{"lat": 1.5, city: Paris} and {"lon": 2.5, x: y}', (None, None)),
        ('{"lat": 3, "a": {"lat": 1, "lon": 2}}', (1.0, 2.0)),  # the one complete object
        ('{"lat": 3, "lon": 4, "a": {"lat": 1, "lon": 2}}', (3.0, 4.0)),  # own keys win
        ("{answer: {lat: 1.5, lon: 2.5, city: X}", (1.5, 2.5)),  # tolerant, one nested object
        ('{"location": {"latitude": -33.9, "longitude": 18.4}, "city": "Cape Town"}', (-33.9, 18.4)),
    ],
)
def test_coordinates_come_from_one_object(text: str, expected: tuple[float | None, float | None]) -> None:
    p = parse_answer(text)
    assert (p.lat, p.lon) == expected


@given(lat=st.floats(min_value=90.0000001, max_value=180.0), lon=st.floats(min_value=-90.0, max_value=90.0))
@settings(max_examples=40, deadline=None)
def test_labeled_latitude_is_never_swapped(lat: float, lon: float) -> None:
    for text in (json.dumps({"lat": lat, "lon": lon}), f"Latitude: {lat}\nLongitude: {lon}"):
        p = parse_answer(text)
        assert p.lat is None and "invalid_coordinates" in p.recovered, text
    p = parse_answer(json.dumps({"coordinates": [lat, lon]}))  # unlabeled: swapped
    assert (p.lat, p.lon) == (lon, lat) and "swapped_lat_lon" in p.recovered


@given(pad=st.integers(min_value=0, max_value=3), broken=st.integers(min_value=0, max_value=80))
@settings(max_examples=8, deadline=None)
def test_far_objects_read_as_near_ones(pad: int, broken: int) -> None:
    """Past 16 Ki characters and 64 failed decodes, spans are decoded alone: same answer."""
    answer = '{"lat": 48.85, "lon": 2.35, "city": "Paris"}'
    text = "x" * (pad * 10_000) + "{bad: json} " * broken + answer
    p = parse_answer(text)
    assert (p.lat, p.lon, p.city) == (48.85, 2.35, "Paris")
