"""parsing.choice: WhereCountry replies read with WhereBench's released regex."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import wherecountry_choice

OPTIONS = ["Italy", "France", "Spain", "Japan"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>I see 2 signs.</think><answer>1 (not 2)</answer>", 0),
        ("<think>Option 3 fits.</think><answer>4. Japan</answer>", 3),
        ("<answer>**2**</answer>", 1),
        ('{"choice": "C"}', 2),  # no number 1-4 anywhere: geosleuth's letter reading
        ("Answer: B", 1),
        ("<tool_response>result 3</tool_response><answer>B</answer>", 1),  # tool output is not the reply
        ("<answer>Japan</answer>", 3),  # no number: geosleuth's reading names the option
        ("<answer>I am not sure.</answer>", None),
    ],
)
def test_wherecountry_choice(text: str, expected: int | None) -> None:
    assert wherecountry_choice(text, OPTIONS) == expected


def test_a_number_past_the_options_is_no_answer() -> None:
    assert wherecountry_choice("<answer>4</answer>", OPTIONS[:3]) is None
