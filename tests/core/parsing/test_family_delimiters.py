"""parsing.delimiters: tool-output blocks, answer blocks and the bounded window."""

from __future__ import annotations

from geosleuth.core.parsing import MAX_PARSE_CHARS, final_own_turn, parse_answer, without_tool_output
from geosleuth.core.parsing.robust import MAX_ANSWER_BLOCKS


def test_tool_blocks_removed_fence_wins() -> None:
    text = "a<tool_response>x<<<TOOL OUTPUT 1>>></tool_response><<<END TOOL OUTPUT>>>y</tool_response>b"
    assert without_tool_output(text).replace(" ", "") == "ab"
    assert final_own_turn("q<tool_response>r</tool_response>final") == "final"
    assert final_own_turn("q<tool_response>cut off") == ""


def test_long_input_keeps_its_tail_outside_a_tool_result() -> None:
    head = "<tool_response>" + "x" * (MAX_PARSE_CHARS + 10) + "</tool_response>"
    p = parse_answer(head + '{"lat": 1.5, "lon": 2.5}')
    assert (p.lat, p.lon) == (1.5, 2.5)
    assert any(r.startswith("input_truncated") for r in p.recovered)


def test_only_the_last_answer_blocks_are_tried() -> None:
    """A hostile text of thousands of answer blocks: the last MAX_ANSWER_BLOCKS are read."""
    first = "<answer>48.85, 2.35</answer>"
    empty = "<answer>nothing</answer>" * (MAX_ANSWER_BLOCKS + 1)
    assert parse_answer(empty + "<answer>10.5, 20.5</answer>").lat == 10.5
    assert parse_answer(first + "<answer>nothing</answer>" * 3).lat == 48.85  # earlier blocks still tried
    assert parse_answer(first + empty).lat is None  # past the cap (and no context outside blocks)
