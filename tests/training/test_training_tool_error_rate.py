"""GeoVista records the tool-call error rate during RL (§5.3): TRL's reward logs it beside the
reward, counted from the rollout's tool messages (the verl manager's test is in
test_training_verl_manager.py)."""

from __future__ import annotations

import pytest

from geosleuth.training.rewards.truth import tool_error_count
from geosleuth.training.trl.reward import make_reward_func

ANSWER = '<answer>{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}</answer>'


def _call(name: str) -> dict:
    return {"type": "function", "function": {"name": name, "arguments": {"query": "Luzern"}}}


def test_trl_reward_logs_failed_calls_over_calls() -> None:
    completions = [
        [
            {"role": "assistant", "content": "", "tool_calls": [_call("search_web"), _call("maps_geocode")]},
            {"role": "tool", "name": "search_web", "content": "Error: search_web timed out after 60 s"},
            {"role": "tool", "name": "maps_geocode", "content": "1. Luzern (47.05, 8.31)"},
            {"role": "assistant", "content": ANSWER},
        ],
        [
            {"role": "assistant", "content": "", "tool_calls": [_call("search_web")]},
            {"role": "tool", "name": "search_web", "content": [{"type": "text", "text": "Error: bad query"}]},
            {"role": "assistant", "content": ANSWER},
        ],
    ]
    logged: dict[str, float] = {}
    make_reward_func("step")(
        completions=completions,
        lat=[47.05, 47.05],
        lon=[8.31, 8.31],
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    # three calls, two answered with an error: 2 / 3
    assert logged["geo/tool_error_rate"] == pytest.approx(2 / 3)


def test_tool_errors_in_plain_rollout_text() -> None:
    text = "<tool_call>{}</tool_call>\n<tool_response>\nError: unknown tool 'x'\n</tool_response>\n"
    text += "no Error: here"
    assert tool_error_count(text) == 1
