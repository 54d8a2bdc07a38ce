"""The verifier as Thinking with Map describes it (§3.3: it is fed "the set of Thinking with Map
trajectories, together with the original image"): every turn's reasoning, tool calls, results and
tool images reach it, within a stated budget; geosleuth's `evidence` view stays available."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import make_config

from geosleuth.agent import run_task
from geosleuth.agent.scaling import full_view
from geosleuth.core.records import Prediction, Task, ToolCallRecord, Trajectory, Turn
from geosleuth.testing import FakeOpenAIServer, reply
from geosleuth.testing.fake_openai import tool_call

FIRST = "The kerb stones are painted red and white, which points to a Central European town."
VERDICT = '{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}'


def _script(req: dict[str, Any]) -> object:
    if req["model"] == "judge":
        return reply(VERDICT)
    if any(m.get("role") == "tool" for m in req["messages"]):
        return reply('{"lat": 47.05, "lon": 8.30, "city": "Luzern", "country": "Switzerland"}')
    return reply(FIRST, tool_calls=[tool_call("image_zoom_tool", {"bbox_2d": [0, 0, 500, 500]}, "c1")])


def _text_and_images(messages: list[dict[str, Any]]) -> tuple[str, int]:
    user = messages[-1]["content"]
    text = "\n".join(p["text"] for p in user if p["type"] == "text")
    return text, sum(p["type"] == "image_url" for p in user)


@pytest.mark.parametrize(("view", "reaches"), [(None, True), ("full", True), ("evidence", False)])
async def test_first_turn_reasoning_reaches_the_verifier(
    query_image: Path, view: str | None, reaches: bool
) -> None:
    task = Task(id="t", image=str(query_image))
    extra = {} if view is None else {"verifier_view": view}
    async with FakeOpenAIServer(_script) as server:
        cfg = make_config(
            server.base_url, prompt_style="thinking_with_map", samples=2, verifier_model="judge", **extra
        )
        out = await run_task(task, cfg)
        judged = [r for r in server.chat_requests if r.json["model"] == "judge"]
    assert out.aggregator == "verifier:judge", out.metadata
    (request,) = judged
    text, images = _text_and_images(request.messages)
    assert (FIRST in text) is reaches  # thinking_with_map's default is the full view
    # the original photo, plus in the full view each candidate's zoomed crop (1 + 2)
    assert images == (3 if reaches else 1)
    assert out.metadata["verifier"]["view"] == (view or "full")


def _long_trajectory() -> Trajectory:
    calls = [ToolCallRecord(name="web_search_tool", arguments={"query": "q"}, result_text="r" * 20_000)]
    turns = [Turn(index=0, text=FIRST + " " + "x" * 9_000, tool_calls=calls)]
    turns += [Turn(index=i, text="y" * 5_000) for i in range(1, 30)]
    pred = Prediction(lat=47.05, lon=8.31, city="Luzern", status="ok")
    return Trajectory(sample_id="s", model="m", turns=turns, prediction=pred)


@pytest.mark.parametrize("budget", [200_000, 20_000, 3_000])
def test_full_view_fits_its_budget_and_keeps_the_first_thought(budget: int) -> None:
    view = full_view(_long_trajectory(), budget)
    # every budget at least holds the first and last turns cut to 200 characters: 2 x ~300 < 3000
    assert len(json.dumps(view, ensure_ascii=False)) <= budget
    assert view["turns"][0]["text"].startswith(FIRST[:90])
    assert view["answer"]["city"] == "Luzern"
    # whole trajectory: 20,000 + 9,000 + 29 x 5,000 = 174,000 characters of text fit in 200,000 only
    assert ("omitted_turns" in view or "characters cut" in json.dumps(view)) is (budget < 200_000)
