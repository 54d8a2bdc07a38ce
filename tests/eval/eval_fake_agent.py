"""Scripted agents for the eval tests, importable by subprocesses via ``--agent-fn``.

``planned`` follows a JSON plan (``GEOSLEUTH_TEST_PLAN``: sample id -> behaviour) without any
network; ``chatting`` is a minimal agent loop against an OpenAI-compatible server
(``GEOSLEUTH_TEST_BASE_URL``), so the eval tests exercise real HTTP before the agent lands.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import (
    ParseStatus,
    Prediction,
    Task,
    ToolCallRecord,
    Trajectory,
    TrajectoryStatus,
    Turn,
    Usage,
)


def _plan() -> dict[str, dict]:
    return json.loads(Path(os.environ["GEOSLEUTH_TEST_PLAN"]).read_text())


async def planned(task: Task) -> Trajectory:
    """Behave as the plan says: answer coordinates, raise, sleep, or return a failed status."""
    step = _plan()[task.id]
    await asyncio.sleep(step.get("sleep", 0.0))
    if step.get("raise"):
        raise RuntimeError(step["raise"])
    calls = [
        ToolCallRecord(name=name, arguments={"q": task.id}, ok=ok, latency_s=0.5, cache_hit=hit)
        for name, ok, hit in step.get("tools", [])
    ]
    prediction = Prediction(
        lat=step.get("lat"),
        lon=step.get("lon"),
        country=step.get("country"),
        city=step.get("city"),
        choice=step.get("choice"),
        confidence=step.get("confidence"),
        raw=step.get("raw", ""),
        status=ParseStatus.OK,
    )
    return Trajectory(
        sample_id=task.id,
        model="planned",
        turns=[
            Turn(
                index=0,
                text="thinking",
                tool_calls=calls,
                usage=Usage(prompt_tokens=100, completion_tokens=20),
            ),
            Turn(
                index=1, text=step.get("raw", "final"), usage=Usage(prompt_tokens=150, completion_tokens=30)
            ),
        ],
        prediction=prediction,
        status=TrajectoryStatus(step.get("status", "ok")),
        started_at=1000.0,
        finished_at=1000.0 + step.get("latency", 2.0),
    )


async def chatting(task: Task) -> Trajectory:
    """Ask the server; run scripted tool calls (answered locally) until it gives a final answer."""
    from geosleuth.agent.client import ChatClient

    messages: list[dict] = [{"role": "user", "content": f"sample: {task.id}\nWhere was this photo taken?"}]
    turns: list[Turn] = []
    async with ChatClient("fake-vlm", os.environ["GEOSLEUTH_TEST_BASE_URL"], max_retries=0) as client:
        for index in range(4):
            response = await client.complete(messages, temperature=0.0)
            choice = response.first
            calls = [
                ToolCallRecord(
                    id=c.id,
                    name=c.name,
                    arguments=json.loads(c.arguments or "{}"),
                    ok=True,
                    result_text=f"result of {c.name}",
                    latency_s=0.1,
                )
                for c in choice.tool_calls
            ]
            turns.append(
                Turn(
                    index=index,
                    text=choice.content,
                    tool_calls=calls,
                    usage=response.usage,
                    latency_s=response.latency_s,
                )
            )
            if not calls:
                prediction = parse_answer(choice.content)
                status = TrajectoryStatus.OK if prediction.has_coords else TrajectoryStatus.PARSE_FAILED
                return Trajectory(
                    sample_id=task.id,
                    model="fake-vlm",
                    turns=turns,
                    prediction=prediction,
                    status=status,
                    started_at=time.time(),
                    finished_at=time.time(),
                )
            messages.append({"role": "assistant", "content": choice.content})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": c.result_text} for c in calls]
    return Trajectory(
        sample_id=task.id, model="fake-vlm", turns=turns, status=TrajectoryStatus.BUDGET_EXHAUSTED
    )


async def replay(task: Task) -> Trajectory:
    """Answer with the text ``GEOSLEUTH_TEST_ANSWERS`` (JSON: sample id -> final answer text) gives
    this sample, parsed as the agent loop parses a final answer (robust, no geocoding)."""
    text = json.loads(os.environ["GEOSLEUTH_TEST_ANSWERS"])[task.id]
    prediction = parse_answer(text)
    return Trajectory(
        sample_id=task.id,
        model="replay",
        turns=[Turn(index=0, text=text)],
        prediction=prediction,
        status=TrajectoryStatus.OK,
    )
