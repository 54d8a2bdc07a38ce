"""The app serves a capped view of a record; the record itself stays whole where it was stored."""

from __future__ import annotations

import json

from geosleuth.core.records import Prediction, ToolCallRecord, Trajectory, Turn
from geosleuth.webapp.views import MAX_SERVED_CHARS, trajectory_view, turn_view


def _huge_trajectory() -> Trajectory:
    call = ToolCallRecord(name="web_search", arguments={"query": "q"}, result_text="r" * 500_000)
    turns = [Turn(index=0, text="t" * 1_000_000 + "ANSWER", reasoning="short", tool_calls=[call])]
    return Trajectory(
        sample_id="s", model="m", turns=turns, prediction=Prediction(raw="p" * 300_000), error="e" * 10
    )


def test_long_strings_are_served_cut_and_the_cuts_are_named() -> None:
    traj = _huge_trajectory()
    view = trajectory_view(traj, lambda ref: None)
    turn = view["turns"][0]
    assert len(turn["text"]) == MAX_SERVED_CHARS and turn["text"].endswith("ANSWER")
    assert len(turn["tool_calls"][0]["result_text"]) == MAX_SERVED_CHARS
    assert turn["reasoning"] == "short" and view["error"] == "e" * 10
    assert view["cut"] == {
        "fields": {
            "prediction.raw": 300_000,
            "turns[0].text": 1_000_006,
            "turns[0].tool_calls[0].result_text": 500_000,
        },
        "max_chars": MAX_SERVED_CHARS,
        "full_record": "trajectories.jsonl",
    }
    assert len(json.dumps(view)) < 5 * MAX_SERVED_CHARS  # was 1.8 MB for this record
    assert len(traj.turns[0].text) == 1_000_006  # the record itself is untouched
    live = turn_view(traj.turns[0], lambda ref: None)  # the job's live events are capped the same way
    assert live["cut"]["fields"] == {"text": 1_000_006, "tool_calls[0].result_text": 500_000}


def test_a_short_record_is_served_as_is() -> None:
    traj = Trajectory(sample_id="s", model="m", turns=[Turn(index=0, text="hello")])
    view = trajectory_view(traj, lambda ref: None)
    assert "cut" not in view and view["turns"][0]["text"] == "hello"
