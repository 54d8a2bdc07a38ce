"""The resumable runner: one durable record per sample, failures recorded, bounded concurrency."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.run.runner import run_samples
from geosleuth.eval.run.store import FAILED_ATTEMPTS, RunDirError, TrajectoryStore


def _samples(n: int) -> list[Sample]:
    return [Sample(id=f"s{i:03d}", lat=0.0, lon=float(i)) for i in range(n)]


def _lines(run_dir: Path) -> list[str]:
    return (run_dir / "trajectories.jsonl").read_text().splitlines()


async def test_every_sample_recorded_once_with_failures(tmp_path: Path) -> None:
    seen_tasks: list[Task] = []

    async def agent(task: Task) -> Trajectory:
        seen_tasks.append(task)
        if task.id == "s001":
            raise ValueError("model exploded")
        if task.id == "s002":
            await asyncio.sleep(5)
        if task.id == "s003":
            return "not a trajectory"  # type: ignore[return-value]
        return Trajectory(sample_id="wrong-id", model="m")

    stats = await run_samples(_samples(6), agent, tmp_path, concurrency=3, timeout_s=0.2)
    records = TrajectoryStore(tmp_path).load()
    assert sorted(records) == [f"s{i:03d}" for i in range(6)] and len(_lines(tmp_path)) == 6
    assert (
        records["s001"].status == TrajectoryStatus.MODEL_ERROR and "model exploded" in records["s001"].error
    )
    assert records["s002"].status == TrajectoryStatus.TIMEOUT
    assert records["s003"].status == TrajectoryStatus.MODEL_ERROR and "returned str" in records["s003"].error
    assert records["s000"].status == TrajectoryStatus.OK and records["s000"].started_at is not None
    assert (stats.done, stats.failed, stats.skipped) == (6, 3, 0)
    assert all(isinstance(t, Task) for t in seen_tasks)


async def test_concurrency_is_bounded(tmp_path: Path) -> None:
    in_flight = peak = 0

    async def agent(task: Task) -> Trajectory:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0.01)
        in_flight -= 1
        return Trajectory(sample_id=task.id, model="m")

    await run_samples(_samples(40), agent, tmp_path, concurrency=5)
    assert peak == 5


async def test_rerun_skips_finished_and_retry_failed_reruns_only_failures(tmp_path: Path) -> None:
    calls: list[str] = []
    broken = {"s002", "s004"}

    async def agent(task: Task) -> Trajectory:
        calls.append(task.id)
        if task.id in broken:
            raise RuntimeError("flaky")
        return Trajectory(sample_id=task.id, model="m")

    await run_samples(_samples(5), agent, tmp_path, concurrency=2)
    calls.clear()
    stats = await run_samples(_samples(5), agent, tmp_path, concurrency=2)
    assert calls == [] and stats.skipped == 5
    broken.clear()
    stats = await run_samples(_samples(5), agent, tmp_path, concurrency=2, retry_failed=True)
    assert sorted(calls) == ["s002", "s004"] and stats.retried == 2
    records = TrajectoryStore(tmp_path).load()
    assert len(_lines(tmp_path)) == 5 and all(r.status == TrajectoryStatus.OK for r in records.values())
    assert len((tmp_path / FAILED_ATTEMPTS).read_text().splitlines()) == 2


async def test_torn_last_line_is_cut_and_rerun(tmp_path: Path) -> None:
    async def agent(task: Task) -> Trajectory:
        return Trajectory(sample_id=task.id, model="m")

    await run_samples(_samples(3), agent, tmp_path)
    text = (tmp_path / "trajectories.jsonl").read_bytes()
    torn = text + b'{"sample_id": "s003", "model": "m", "tur'
    (tmp_path / "trajectories.jsonl").write_bytes(torn)
    assert sorted(TrajectoryStore(tmp_path).load()) == ["s000", "s001", "s002"]
    await run_samples(_samples(4), agent, tmp_path)
    assert [line[:22] for line in _lines(tmp_path)][-1].startswith('{"sample_id":"s003"')
    assert len(_lines(tmp_path)) == 4


def test_corrupt_middle_line_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "trajectories.jsonl").write_text(
        '{"sample_id": "a", "model": "m"}\ngarbage\n{"sample_id": "b", "model": "m"}\n'
    )
    with pytest.raises(RunDirError, match="line 2"):
        TrajectoryStore(tmp_path).load()


async def test_bad_concurrency(tmp_path: Path) -> None:
    async def agent(task: Task) -> Trajectory:
        return Trajectory(sample_id=task.id, model="m")

    with pytest.raises(ValueError, match="concurrency"):
        await run_samples(_samples(1), agent, tmp_path, concurrency=0)


def test_get_streams_one_sample_and_the_latest_record_wins(tmp_path: Path) -> None:
    store = TrajectoryStore(tmp_path)
    store.open()
    store.append([Trajectory(sample_id="a", model="m1"), Trajectory(sample_id="b", model="m1")])
    store.append([Trajectory(sample_id="a", model="m2")])
    store.close()
    got = store.get("a")
    assert got is not None and got.model == "m2"
    assert store.get("missing") is None
    assert TrajectoryStore(tmp_path / "nothing").get("a") is None


def test_bad_sample_line_is_a_run_dir_error(tmp_path: Path) -> None:
    from geosleuth.eval.run.pipeline import read_samples, write_samples

    write_samples(tmp_path, [Sample(id="a", lat=1.0, lon=2.0)])
    assert [s.id for s in read_samples(tmp_path)] == ["a"]
    with (tmp_path / "samples.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"id": 5, "lat": "north"}\n')
    with pytest.raises(RunDirError, match="line 2"):
        read_samples(tmp_path)


async def test_the_timeout_counts_from_the_first_model_request(tmp_path: Path) -> None:
    """A slow start-up (a loaded host) is not charged to --timeout; the model's time is."""
    from geosleuth.agent import ChatClient
    from geosleuth.bounds.deadline import defer_clock
    from geosleuth.testing import FakeOpenAIServer, Step, delay, reply

    def script(request: dict) -> Step:  # s001's model answers after 3 s, past the 1.5 s limit
        slow = "s001" in json.dumps(request)
        return delay(3.0, reply("late")) if slow else reply("fine")

    async with FakeOpenAIServer(script) as server:

        async def agent(task: Task) -> Trajectory:
            defer_clock()  # as the built-in agent does when it starts
            await asyncio.sleep(2.0)  # start-up: longer than the timeout
            async with ChatClient("m", server.base_url, max_retries=0) as client:
                await client.complete([{"role": "user", "content": task.id}])
            return Trajectory(sample_id=task.id, model="m")

        await run_samples(_samples(2), agent, tmp_path, concurrency=2, timeout_s=1.5)
    records = TrajectoryStore(tmp_path).load()
    assert records["s000"].status == TrajectoryStatus.OK
    assert records["s001"].status == TrajectoryStatus.TIMEOUT
    assert records["s001"].error == "no result within 1.5 s of the first model request"


async def test_a_run_function_that_asks_no_model_is_timed_from_its_start(tmp_path: Path) -> None:
    async def agent(task: Task) -> Trajectory:
        await asyncio.sleep(30)
        return Trajectory(sample_id=task.id, model="m")

    begun = time.perf_counter()
    await run_samples(_samples(1), agent, tmp_path, timeout_s=0.2)
    assert time.perf_counter() - begun < 10  # cut at 0.2 s; without the deadline, 30 s
    assert TrajectoryStore(tmp_path).load()["s000"].error == "no result within 0.2 s"


async def test_the_built_in_agent_is_not_charged_for_a_slow_image_decode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from PIL import Image

    import geosleuth.agent.runner as agent_runner
    from geosleuth.agent import AgentConfig, run_task
    from geosleuth.agent.workers import ParsePool, use_parse_pool
    from geosleuth.testing import FakeOpenAIServer, reply

    decode = agent_runner.load_image

    def slow_decode(*args: object, **kwargs: object) -> Image.Image:
        time.sleep(0.8)  # a loaded host: start-up alone is longer than the timeout
        return decode(*args, **kwargs)

    threads = ParsePool(0)  # parse in threads: a parse worker's own start is not what is measured
    previous = use_parse_pool(threads)
    Image.new("RGB", (64, 48), (90, 120, 200)).save(tmp_path / "a.png")
    sample = Sample(id="a", image=str(tmp_path / "a.png"), lat=0.0, lon=0.0)
    answer = '{"lat": 1.0, "lon": 2.0, "city": "X", "country": "Y"}'
    async with FakeOpenAIServer(default=reply(answer)) as server:
        config = AgentConfig(model="m", base_url=server.base_url, prompt_style="thinking_with_map", tools=[])

        async def agent(task: Task) -> Trajectory:
            return await run_task(task, config)

        try:
            assert (await agent(Task.from_sample(sample))).status == TrajectoryStatus.OK  # warm imports
            monkeypatch.setattr(agent_runner, "load_image", slow_decode)
            await run_samples([sample], agent, tmp_path / "run", timeout_s=0.5)
        finally:
            use_parse_pool(previous)
            threads.close()
    record = TrajectoryStore(tmp_path / "run").load()["a"]
    assert record.status == TrajectoryStatus.OK, record.error


async def test_bounded_results_queue_writes_everything_and_surfaces_a_failed_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Agents faster than the writer wait for it (a queue of 1 here): every record is still written
    once; a write that fails is raised once the workers stop, never a hang on a full queue."""
    import geosleuth.eval.run.runner as runner

    monkeypatch.setattr(runner, "PENDING_WRITES", 1)

    async def agent(task: Task) -> Trajectory:
        return Trajectory(sample_id=task.id, model="m")

    stats = await run_samples(_samples(40), agent, tmp_path / "ok", concurrency=1)
    assert stats.done == 40 and len(_lines(tmp_path / "ok")) == 40

    def broken(self: TrajectoryStore, batch: list[Trajectory]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TrajectoryStore, "append", broken)
    with pytest.raises(OSError, match="No space left"):
        await asyncio.wait_for(run_samples(_samples(40), agent, tmp_path / "full", concurrency=1), timeout=30)
