"""parsing.fields: any key/value mapping -> answer fields, keys in any spelling, planned once."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import field_key, parse_answer


@pytest.mark.parametrize(
    ("key", "canonical"),
    [("Town or City", "town_or_city"), ("**Country**", "country"), ("State-Province", "state_province")],
)
def test_field_key(key: str, canonical: str) -> None:
    assert field_key(key) == canonical


@pytest.mark.parametrize(
    "text",
    [
        '{"Latitude": 48.85, "Longitude": 2.35, "City": "Paris", "Country": "France"}',
        '{"纬度": 48.85, "经度": 2.35, "城市": "Paris", "国家": "France"}',
        '{"coords": [48.85, 2.35], "town_or_city": "Paris", "nation": "France"}',
        "Latitude: 48.85\nLongitude: 2.35\nCity: Paris\nCountry: France",
    ],
)
def test_any_spelling_of_the_keys(text: str) -> None:
    p = parse_answer(text)
    assert (p.lat, p.lon, p.city, p.country) == (48.85, 2.35, "Paris", "France")
