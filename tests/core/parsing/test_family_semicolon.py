"""parsing.semicolon: GeoAgent's ``Country; Region; Place``, with or without an answer prefix."""

from __future__ import annotations

import pytest

from geosleuth.core.parsing import parse_answer


@pytest.mark.parametrize(
    "text",
    [
        "United States; Virginia; Montrose",
        "Final answer: United States; Virginia; Montrose",
        "**Final Answer:** United States; Virginia; Montrose",
        "The answer is United States；Virginia；Montrose",
    ],
)
@pytest.mark.parametrize("mode", ["robust", "strict"])
def test_levels_coarse_to_fine(text: str, mode: str) -> None:
    p = parse_answer(text, mode, "geoagent" if mode == "strict" else None)  # type: ignore[arg-type]
    assert (p.country, p.admin1, p.poi) == ("United States", "Virginia", "Montrose"), p
