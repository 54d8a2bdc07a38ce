"""parsing.prose: the address shapes issue 21 lists are read as names, sentences are not."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import parse_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("this is Juan Griego (Nueva Esparta, Venezuela)", ("Venezuela", "Nueva Esparta", "Juan Griego")),
        ("Juan Griego (Nueva Esparta, Venezuela)", ("Venezuela", "Nueva Esparta", "Juan Griego")),
        ("<answer>Houston (Texas, United States)</answer>", ("United States", "Texas", "Houston")),
        ("houston, texas, united states", ("united states", "texas", "houston")),
        ("Cape Town, WE, South Africa", ("South Africa", "WE", "Cape Town")),
        ("Vilanova i la Geltrú, Catalonia, Spain", ("Spain", "Catalonia", "Vilanova i la Geltrú")),
        ("It looks like Montrose, Virginia, United States.", ("United States", "Virginia", "Montrose")),
    ],
)
def test_address_shapes(text: str, expected: tuple[str, str, str]) -> None:
    p = parse_answer(text)
    assert (p.country, p.admin1, p.city) == expected, p


@pytest.mark.parametrize(
    "text",
    [
        "I think it is 2 or 3 streets from here",
        "i am not sure",
        "this is hard to say",
        "houston, we have a problem",  # lower case and no country at the end: not a place
    ],
)
def test_sentences_are_no_place(text: str) -> None:
    p = parse_answer(text)
    assert p.country is None and p.city is None and p.lat is None, p


def test_a_remark_that_is_no_hierarchy_is_dropped() -> None:
    p = parse_answer('{"country": "United States (confirmed, by the plates)", "city": "Austin"}')
    assert (p.country, p.city) == ("United States", "Austin")


@pytest.mark.parametrize(
    "text", ["United States, Virginia, Montrose", "Final answer: United States, Virginia, Montrose"]
)
def test_coarse_to_fine_comma_address(text: str) -> None:
    p = parse_answer(text)
    assert (p.country, p.admin1, p.city) == ("United States", "Virginia", "Montrose")
    assert "coarse_to_fine_address" in p.recovered
