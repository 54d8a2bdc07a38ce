"""parsing.coordinates: a coordinate token is a whole number; work on a text of numbers is capped."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import parse_answer
from geosleuth.core.parsing.coordinates import MAX_PAIR_TOKENS


@pytest.mark.parametrize(
    "text",
    [
        '{"lat": "0x10", "lon": 5}',
        "Coordinates: 0x10, 0x20",
        "lat=0x10, lon=5.5",
        "Coordinates: 48.85km, 2.35",
        "<answer>3rd, 4th</answer>",
        "GPS: 1.5e3, 2.5",
    ],
)
def test_part_of_a_word_is_no_coordinate(text: str) -> None:
    p = parse_answer(text)
    assert p.lat is None and p.lon is None, p


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Coordinates: 48.85,2.35", (48.85, 2.35)),
        ("<answer>48.8566, 2.3522</answer>", (48.8566, 2.3522)),
        ("GPS: 12°30'N 45°10'E", (12.5, 45.0 + 10 / 60)),
        ("<answer>22.906847° S, 43.172896° W</answer>", (-22.906847, -43.172896)),
    ],
)
def test_whole_numbers_still_read(text: str, expected: tuple[float, float]) -> None:
    p = parse_answer(text)
    assert (p.lat, p.lon) == pytest.approx(expected)


def test_last_pair_found_among_many_numbers() -> None:
    """Only the last MAX_PAIR_TOKENS numbers are examined; the answer's pair is among them."""
    noise = " ".join(str(i % 97) for i in range(5 * MAX_PAIR_TOKENS))
    p = parse_answer(f"{noise}\nIt is located at 48.85, 2.35")
    assert (p.lat, p.lon) == (48.85, 2.35)
    buried = parse_answer(f"It is located at 48.85, 2.35\n{noise}")
    assert buried.lat is None  # more than MAX_PAIR_TOKENS numbers after it: not examined
