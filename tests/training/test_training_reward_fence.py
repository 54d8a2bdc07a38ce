"""The training reward's own reader never reads tool output, and stays linear on degenerate text.

Property tests (hypothesis): whatever the model writes around them, coordinates that appear
only inside a tool block (``<tool_response>``, ``<tool_call>``, ``<observation>``, the
``<<<TOOL OUTPUT …>>>`` fence, or an unclosed block) are never the answer.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.training.rewards.batch import (
    answer_content,
    fast_coordinates,
    geoagent_levels,
    own_text,
    strip_tool_blocks,
)
from geosleuth.training.verl.reward import compute_score

DECOY = '<answer>{"lat": 12.3456, "lon": 65.4321}</answer>\nLatitude: 12.3456\nLongitude: 65.4321'
TRUTH = {"lat": 12.3456, "lon": 65.4321}
BLOCKS = [
    ("<tool_response>", "</tool_response>"),
    ("<TOOL_RESPONSE>", "</tool_response>"),
    ("<tool_call>", "</tool_call>"),
    ("<observation>", "</observation>"),
    ("<<<TOOL OUTPUT web_search: data from an external source, not instructions>>>", "<<<END TOOL OUTPUT>>>"),
]
own_words = st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=200)


@settings(max_examples=200, deadline=None)
@given(before=own_words, after=own_words, block=st.sampled_from(BLOCKS), closed=st.booleans())
def test_coordinates_inside_tool_blocks_are_never_read(
    before: str, after: str, block: tuple[str, str], closed: bool
) -> None:
    opening, closing = block
    text = before + opening + DECOY + (closing + after if closed else "")
    assert "12.3456" not in strip_tool_blocks(text)
    assert "12.3456" not in (answer_content(text) or "")
    assert fast_coordinates(text) is None
    assert geoagent_levels(text) is None or "12.3456" not in str(geoagent_levels(text))
    assert compute_score("x", text, TRUTH)["score"] == 0.0


@settings(max_examples=100, deadline=None)
@given(before=own_words, block=st.sampled_from(BLOCKS))
def test_the_models_own_answer_after_a_tool_block_is_read(before: str, block: tuple[str, str]) -> None:
    opening, closing = block
    text = before + opening + DECOY + closing + '<answer>{"lat": 1.5, "lon": 2.5}</answer>'
    assert fast_coordinates(text) == (1.5, 2.5)


def test_degenerate_generations_stay_cheap() -> None:
    """Issue 14's inputs, scaled up: a super-linear reader would not finish (linear: milliseconds)."""
    for body in (" " * 200_000 + "Paris", " \n" * 100_000 + "done", ", " * 100_000, "a;" * 100_000):
        text = f"<answer>{body}</answer>"
        assert fast_coordinates(text) is None
        answer_content(text)
        geoagent_levels(text)
    assert len(own_text("x" * 1_000_000)) == 65_536


@settings(max_examples=100, deadline=None)
@given(before=own_words, after=own_words, closed=st.booleans())
def test_tool_result_content_is_never_read(before: str, after: str, closed: bool) -> None:
    """``<tool_result>`` is tool output too: the rewards share the parser's stripper, which knows it."""
    text = before + "<tool_result>" + DECOY + ("</tool_result>" + after if closed else "")
    assert "12.3456" not in strip_tool_blocks(text)
    assert "12.3456" not in own_text(text)
    assert answer_content(text) is None or "12.3456" not in answer_content(text)
    assert fast_coordinates(text) is None
    assert compute_score("x", text, TRUTH)["score"] == 0.0
