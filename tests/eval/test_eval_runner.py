"""The resumable runner: one durable record per sample, failures recorded, bounded concurrency."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.runner import run_samples
from geosleuth.eval.store import FAILED_ATTEMPTS, RunDirError, TrajectoryStore


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
    from geosleuth.eval.run import read_samples, write_samples

    write_samples(tmp_path, [Sample(id="a", lat=1.0, lon=2.0)])
    assert [s.id for s in read_samples(tmp_path)] == ["a"]
    with (tmp_path / "samples.jsonl").open("a", encoding="utf-8") as handle:
        handle.write('{"id": 5, "lat": "north"}\n')
    with pytest.raises(RunDirError, match="line 2"):
        read_samples(tmp_path)
