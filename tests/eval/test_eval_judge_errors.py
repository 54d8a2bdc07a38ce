"""WhereBench's error taxonomy as a judge task, and Cohen's κ of any judge against human labels
(issue 43 item 6), against the fake OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from geosleuth.core.records import ParseStatus, Prediction, Sample, ToolCallRecord, Trajectory, Turn
from geosleuth.eval.judges.tasks import HUMAN_LABELS, judge_summary, read_judgments, run_judges
from geosleuth.eval.run.config import JudgeSettings
from geosleuth.testing import FakeOpenAIServer, reply

SAMPLES = [
    Sample(id="a", labels={"country": "Germany", "city": "Munich"}),
    Sample(id="b", labels={"country": "Japan", "city": "Tokyo"}),
    Sample(id="c", labels={"country": "Peru", "city": "Lima"}),
    Sample(id="d", labels={"country": "Chile", "city": "Santiago"}),
]


def _traj(sid: str, answer: str, thought: str) -> Trajectory:
    call = ToolCallRecord(name="search_web", arguments={"query": "yellow taxi"}, result_text="Quito taxis")
    turn = Turn(index=0, text=f"{thought} <answer>{answer}</answer>", reasoning=thought, tool_calls=[call])
    return Trajectory(
        sample_id=sid, model="m", turns=[turn], prediction=Prediction(raw=answer, status=ParseStatus.OK)
    )


TRAJECTORIES = {
    "a": _traj("a", "Munich, Germany", "Bavarian flags."),
    "b": _traj("b", "Osaka, Japan", "Tokyo at first, but the accent of the signs says Osaka."),
    "c": _traj("c", "Quito, Ecuador", "Yellow taxis."),
    "d": _traj("d", "Lima, Peru", "Spanish signs."),
}
VERDICTS = {
    "Munich, Germany": "correct",
    "Osaka, Japan": "overthinking",
    "Quito, Ecuador": "incomplete_search",
    "Lima, Peru": "missed_visual_clues",
}


def script(body: dict[str, Any]):  # type: ignore[no-untyped-def]
    prompt = body["messages"][0]["content"]
    answer = next(a for a in VERDICTS if f"<answer>\n{a}\n</answer>" in prompt)
    return reply(json.dumps({"error": VERDICTS[answer], "reason": "as scripted"}))


async def test_error_taxonomy_judge_and_kappa_against_humans(tmp_path: Path) -> None:
    settings = JudgeSettings(model="judge", base_url="http://127.0.0.1:1", max_retries=0, tasks=["errors"])
    with FakeOpenAIServer(script) as server:
        settings = settings.model_copy(update={"base_url": server.base_url})
        assert await run_judges(tmp_path, SAMPLES, TRAJECTORIES, settings) == 4
        prompts = [r.messages[0]["content"] for r in server.chat_requests]
    assert any("Quito taxis" in p and "Lima" in p for p in prompts)  # truth, answer and tool use reach it
    records = read_judgments(tmp_path)
    assert records[("b", "errors")]["result"]["error"] == "overthinking"
    human = [
        {"sample_id": "a", "judge": "errors", "error": "correct"},
        {"sample_id": "b", "judge": "errors", "error": "overthinking"},
        {"sample_id": "c", "judge": "errors", "error": "missed_visual_clues"},
        {"sample_id": "d", "judge": "errors", "error": "missed_visual_clues"},
    ]
    (tmp_path / HUMAN_LABELS).write_text("".join(json.dumps(h) + "\n" for h in human) + "not json\n")
    summary = judge_summary(tmp_path)["errors"]
    # judge shares: correct, overthinking, incomplete_search, missed_visual_clues one each = 0.25
    assert summary["shares"] == dict.fromkeys(
        ["correct", "incomplete_search", "missed_visual_clues", "overthinking"], 0.25
    )
    # κ: 3 of 4 agree, p_o = 0.75; judge marginals 1/4 each, human correct 1/4, overthinking 1/4,
    # missed 2/4: p_e = 1/16 + 1/16 + 0 + 2/16 = 0.25; κ = (0.75 − 0.25) / 0.75 = 2/3
    assert summary["human_agreement"]["kappa"] == pytest.approx(2 / 3, abs=1e-6)
    assert summary["human_agreement"]["pairs"] == 4
