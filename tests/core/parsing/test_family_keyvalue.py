"""parsing.keyvalue: tagged ``Key: value`` lines, strict decimal degrees, bounded line count."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import parse_answer
from geosleuth.core.parsing.keyvalue import MAX_KEY_LINES


@pytest.mark.parametrize(
    ("value_lat", "value_lon", "expected"),
    [
        ("22.906847° S", "43.172896° W", (-22.906847, -43.172896)),
        ("22.906847 S", "43.172896W", (-22.906847, -43.172896)),
        ("-22.906847", "-43.172896", (-22.906847, -43.172896)),
        ("22.906847°", "43.172896°", (22.906847, 43.172896)),
        ("22d54m24.6sS", "43d10m22.4sW", None),  # minutes/seconds: robust only
        ("~22.9", "43.1", None),  # hedged: strict reads no coordinate
        ("22.9 E", "43.1 N", None),  # wrong axis letters
    ],
)
def test_spotagent_strict_coordinates(value_lat: str, value_lon: str, expected: object) -> None:
    for sep in ("\n", ", "):
        body = f"Country: Brazil{sep}City: Rio{sep}Latitude: {value_lat}{sep}Longitude: {value_lon}"
        text = f"<answer>{body}</answer>"
        p = parse_answer(text, "strict", "spotagent")
        got = None if p.lat is None else (p.lat, p.lon)
        assert got == expected, text


def test_key_lines_past_the_cap_are_not_read() -> None:
    filler = "Note: nothing\n" * MAX_KEY_LINES
    assert parse_answer(f"Country: France\n{filler}City: Paris").country == "France"
    assert parse_answer(f"{filler}Country: France").country is None
