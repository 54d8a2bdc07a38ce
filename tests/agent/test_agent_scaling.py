"""Test-time scaling: N samples, the geodesic medoid, and a verifier that never sees ground truth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_helpers import image_parts, make_config

from geosleuth.agent import medoid_aggregate, run_task
from geosleuth.agent.client import ChatClient
from geosleuth.agent.images import load_image, prepare_image
from geosleuth.agent.scaling import verify
from geosleuth.core.records import (
    Prediction,
    Sample,
    Task,
    ToolCallRecord,
    Trajectory,
    TrajectoryStatus,
    Turn,
)
from geosleuth.testing import FakeOpenAIServer, error, reply


def traj(lat: float | None, lon: float | None, **meta: object) -> Trajectory:
    pred = Prediction(lat=lat, lon=lon, city="c", status="ok" if lat is not None else "failed")
    return Trajectory(sample_id="s", model="m", prediction=pred, metadata=dict(meta))


def test_medoid_takes_the_largest_cluster_and_reports_agreement() -> None:
    samples = [traj(47.37, 8.54), traj(47.40, 8.50), traj(47.35, 8.60), traj(40.71, -74.0), traj(None, None)]
    pred = medoid_aggregate(samples, radius_km=25)
    assert pred is not None
    assert (pred.lat, pred.lon) == (47.37, 8.54)  # the member closest to the others
    assert pred.confidence == pytest.approx((3 + 1) / (5 + 2), abs=1e-3)  # rule of succession
    assert pred.coords_source == "aggregate" and 0 < (pred.radius_km or 0) < 25
    assert medoid_aggregate([traj(None, None)]) is None


def test_medoid_of_a_single_answer_has_low_confidence() -> None:
    pred = medoid_aggregate([traj(1.0, 2.0), traj(None, None), traj(None, None), traj(None, None)])
    assert pred is not None and pred.confidence == pytest.approx((1 + 1) / (4 + 2), abs=1e-3)


async def test_samples_run_concurrently_and_are_all_recorded(query_image: Path) -> None:
    answers = iter(
        ['{"lat": 47.37, "lon": 8.54}', '{"lat": 47.38, "lon": 8.55}', '{"lat": 48.85, "lon": 2.35}']
    )
    async with FakeOpenAIServer(lambda _req: reply(next(answers))) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=3, seed=10)
        out = await run_task(Task(id="t", image=str(query_image)), cfg)
    assert len(out.samples) == 3 and out.aggregator == "medoid"
    assert out.prediction and out.prediction.confidence == pytest.approx((2 + 1) / (3 + 2), abs=1e-3)
    assert sorted(r.json["seed"] for r in server.chat_requests) == [10, 11, 12]
    # identical image bytes in every sample, so a server prefix cache can reuse them
    urls = {image_parts(r.json["messages"][1])[0]["image_url"]["url"] for r in server.chat_requests}
    assert len(urls) == 1


LEAKY_VALUES = ("48.1372", "11.5761", "Munich", "Bavaria", "0.987654", "123.456")


def leaky_trajectories() -> list[Trajectory]:
    """Trajectories as an evaluator might hold them, carrying scores and ground truth in metadata."""
    out = []
    for lat, lon in ((47.37, 8.54), (47.38, 8.55)):
        t = Trajectory(
            sample_id="s1",
            model="m",
            turns=[
                Turn(
                    index=0,
                    text='<tool_call>{"name": "geocode", "arguments": {"address": "X"}}</tool_call>',
                    tool_calls=[
                        ToolCallRecord(
                            name="geocode", arguments={"address": "Bahnhofstrasse"}, result_text="47.37, 8.54"
                        )
                    ],
                ),
                Turn(
                    index=1,
                    text=json.dumps({"lat": lat, "lon": lon, "city": "Zürich", "country": "Switzerland"}),
                ),
            ],
            prediction=Prediction(lat=lat, lon=lon, city="Zürich", country="Switzerland", status="ok"),
            metadata={
                "ground_truth": {"lat": 48.1372, "lon": 11.5761, "city": "Munich", "admin1": "Bavaria"},
                "reward": 0.987654,
                "distance_km": 123.456,
            },
        )
        out.append(t)
    return out


async def test_verifier_never_receives_ground_truth_or_scores(query_image: Path) -> None:
    sample = Sample(
        id="s1",
        image=str(query_image),
        lat=48.1372,
        lon=11.5761,
        labels={"city": "Munich", "admin1": "Bavaria"},
    )
    task = Task.from_sample(sample)
    prepared = prepare_image(load_image(query_image))
    verdict = (
        '{"lat": 47.375, "lon": 8.545, "city": "Zürich", "country": "CH", "confidence": 0.8, "chosen": 1}'
    )
    async with (
        FakeOpenAIServer([reply(verdict)]) as server,
        ChatClient("judge", server.base_url, max_retries=0) as client,
    ):
        pred, log = await verify(task, leaky_trajectories(), client, prepared)
    body = server.chat_requests[0].body.decode()
    for value in LEAKY_VALUES:
        assert value not in body
    for key in ("ground_truth", "reward", "distance_km"):
        assert f'"{key}"' not in body and f'\\"{key}\\"' not in body
    # it did get the image, the evidence and both answers
    request = server.chat_requests[0].json
    assert len(image_parts(request["messages"][1])) == 1
    assert "Bahnhofstrasse" in body and "47.38" in body
    assert pred is not None and pred.lat == pytest.approx(47.375) and pred.coords_source == "aggregate"
    assert log["model"] == "judge" and "text" in log


async def test_verifier_path_end_to_end_and_fallback(query_image: Path) -> None:
    def script(req: dict) -> object:
        if req["model"] == "judge":
            return reply('{"lat": 47.1, "lon": 8.1, "city": "Luzern", "country": "Switzerland"}')
        return reply('{"lat": 47.37, "lon": 8.54, "city": "Zürich", "country": "Switzerland"}')

    task = Task(id="t", image=str(query_image))
    async with FakeOpenAIServer(script) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=2, verifier_model="judge")
        out = await run_task(task, cfg)
    assert out.aggregator == "verifier:judge" and out.prediction and out.prediction.city == "Luzern"
    assert len(out.samples) == 2 and out.metadata["verifier"]["model"] == "judge"

    def failing_judge(req: dict) -> object:
        return error(400, "no") if req["model"] == "judge" else reply('{"lat": 47.37, "lon": 8.54}')

    async with FakeOpenAIServer(failing_judge) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=2, verifier_model="judge")
        out = await run_task(task, cfg)
    assert out.aggregator == "medoid (verifier failed)" and out.prediction and out.prediction.lat == 47.37
    assert "HTTP 400" in out.metadata["verifier"]["error"]


async def test_all_samples_failing_gives_a_failed_aggregate(query_image: Path) -> None:
    async with FakeOpenAIServer(default=error(500)) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=2, max_retries=0)
        out = await run_task(Task(id="t", image=str(query_image)), cfg)
    assert out.prediction is None and out.status is TrajectoryStatus.MODEL_ERROR
    assert "none of the 2 samples" in (out.error or "")


async def test_verifier_is_not_asked_when_no_sample_answered(query_image: Path) -> None:
    """With nothing to choose from, a verifier could only invent a location."""

    def script(req: dict) -> object:
        if req["model"] == "judge":
            return reply('{"lat": 1.0, "lon": 2.0, "city": "Invented", "country": "Nowhere"}')
        return reply("I cannot tell where this is.")

    async with FakeOpenAIServer(script) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=2, verifier_model="judge")
        out = await run_task(Task(id="t", image=str(query_image)), cfg)
        judge_calls = [r for r in server.chat_requests if r.json["model"] == "judge"]
    assert judge_calls == [] and out.prediction is None
    assert out.metadata["verifier"]["skipped"] == "no sample produced an answer"


async def test_choice_tasks_aggregate_by_majority_vote(query_image: Path) -> None:
    answers = iter(["Answer: B", "Answer: C", "Answer: B"])
    async with FakeOpenAIServer(lambda _req: reply(next(answers))) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=3)
        task = Task(id="t", image=str(query_image), choices=["A. Peru", "B. Chile", "C. Bolivia"])
        out = await run_task(task, cfg)
    assert out.status is TrajectoryStatus.OK and out.aggregator == "majority choice"
    assert out.prediction and out.prediction.choice == "B"
    assert out.prediction.confidence == pytest.approx((2 + 1) / (3 + 2), abs=1e-3)


async def test_samples_without_coordinates_are_not_an_ok_aggregate(query_image: Path) -> None:
    async with FakeOpenAIServer(default=reply('{"country": "France"}')) as server:
        cfg = make_config(server.base_url, prompt_style="direct", samples=2)
        out = await run_task(Task(id="t", image=str(query_image)), cfg)
    assert all(s.status is TrajectoryStatus.OK for s in out.samples)
    assert out.prediction is None and out.status is TrajectoryStatus.PARSE_FAILED


def test_two_samples_agreeing_are_not_certain_and_keep_a_radius() -> None:
    """Two samples on the same wrong city centre: 3/4 by the rule of succession, not 100 %, and
    a radius of 25 / sqrt(2) km (the clustering resolution), not 0 km."""
    pred = medoid_aggregate([traj(48.8566, 2.3522), traj(48.8566, 2.3522)], radius_km=25)
    assert pred is not None and pred.confidence == pytest.approx(0.75)
    assert pred.radius_km == pytest.approx(25 / 2**0.5, abs=1e-3)
    claimed = [traj(48.8566, 2.3522), traj(48.8566, 2.3522)]
    for t in claimed:
        t.prediction.radius_km = 3.0
    assert medoid_aggregate(claimed).radius_km == pytest.approx(3.0)  # what the samples claim
