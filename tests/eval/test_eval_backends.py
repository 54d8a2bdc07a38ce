"""Sharding, merge and lost-worker logic of the scale-out backend, and a real local Ray run (slow)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.run.backends import (
    MAX_BATCH_ATTEMPTS,
    InProcessExecutor,
    NoWorkerLeft,
    WorkerLost,
    plan_batches,
    run_sharded,
    shard_of,
)
from geosleuth.eval.run.store import TrajectoryStore

HERE = Path(__file__).resolve().parent


def _samples(n: int) -> list[Sample]:
    return [Sample(id=f"id{i}", lat=1.0, lon=2.0, labels={"country": "FR"}) for i in range(n)]


def test_plan_batches_is_stable_complete_and_strips_truth() -> None:
    samples = _samples(100)
    plan = plan_batches(samples, 3, 8)
    tasks = [t for shard in plan for batch in shard for t in batch]
    assert sorted(t.id for t in tasks) == sorted(s.id for s in samples)
    assert all(isinstance(t, Task) and len(b) <= 8 for shard in plan for b in shard for t in b)
    assert all(shard_of(t.id, 3) == i for i, shard in enumerate(plan) for b in shard for t in b)
    assert plan == plan_batches(list(reversed(samples))[::-1], 3, 8)
    assert min(sum(len(b) for b in shard) for shard in plan) > 15  # roughly balanced
    with pytest.raises(ValueError):
        plan_batches(samples, 0, 8)


def _endpoint_fn(name: str, fail_ids: set[str] | None = None):  # type: ignore[no-untyped-def]
    async def run(task: Task) -> Trajectory:
        if fail_ids and task.id in fail_ids:
            raise ConnectionError(f"{name} is down")
        return Trajectory(sample_id=task.id, model=name)

    return run


class FlakyExecutor(InProcessExecutor):
    """Shard 1's worker raises an error of its own (not a lost worker) on its first batch."""

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.crashed = False

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        if shard == 1 and not self.crashed:
            self.crashed = True
            raise RuntimeError("bad payload")
        return await super().run(shard, tasks)


class LosingExecutor(InProcessExecutor):
    """Workers in ``dying`` are lost on their first ``losses`` batches (their node died mid-batch);
    those in ``gone`` never come back; a batch holding ``poison`` loses its worker every time."""

    def __init__(self, *args, dying=(), losses=1, gone=(), poison=None, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)
        self.left = {shard: losses for shard in dying}
        self.gone = set(gone)
        self.poison = poison
        self.ran: list[tuple[int, list[str]]] = []
        self.recovered: list[int] = []

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        if self.left.get(shard, 0) > 0 or shard in self.gone or any(t.id == self.poison for t in tasks):
            self.left[shard] = self.left.get(shard, 0) - 1
            raise WorkerLost(f"node of worker {shard} died")
        self.ran.append((shard, [t.id for t in tasks]))
        return await super().run(shard, tasks)

    async def recover(self, shard: int) -> bool:
        self.recovered.append(shard)
        return shard not in self.gone


async def test_run_sharded_merges_into_one_log_and_resumes(tmp_path: Path) -> None:
    samples = _samples(50)
    fns = [_endpoint_fn(f"http://node{i}:8000/v1") for i in range(3)]
    executor = FlakyExecutor(fns, concurrency=4, timeout_s=None)
    stats = await run_sharded(samples, executor, TrajectoryStore(tmp_path), 3, batch_size=5)
    records = TrajectoryStore(tmp_path).load()
    assert len(records) == 50 and stats.done == 50
    lost = [r for r in records.values() if r.status != TrajectoryStatus.OK]
    assert len(lost) == 5 and all("worker 1 failed: RuntimeError: bad payload" in r.error for r in lost)
    assert stats.batches_retried == 0  # the worker answered: running it again would repeat the error
    assert all(
        r.model == f"http://node{shard_of(r.sample_id, 3)}:8000/v1"
        for r in records.values()
        if r.status == "ok"
    )
    again = await run_sharded(
        samples, InProcessExecutor(fns, 4, None), TrajectoryStore(tmp_path), 3, retry_failed=True
    )
    assert again.retried == 5 and again.done == 5 and again.skipped == 45
    lines = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 50 and all(
        r.status == TrajectoryStatus.OK for r in TrajectoryStore(tmp_path).load().values()
    )


def _once_and_ok(run_dir: Path, samples: list[Sample]) -> dict[str, Trajectory]:
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    records = [Trajectory.model_validate_json(line) for line in lines]
    assert sorted(r.sample_id for r in records) == sorted(s.id for s in samples)  # each exactly once
    assert all(r.status == TrajectoryStatus.OK for r in records)
    return {r.sample_id: r for r in records}


async def test_a_lost_workers_batch_runs_again_elsewhere_and_it_takes_its_shard_back(tmp_path: Path) -> None:
    samples = _samples(60)
    fns = [_endpoint_fn(f"http://node{i}:8000/v1") for i in range(3)]
    executor = LosingExecutor(fns, concurrency=4, timeout_s=None, dying=[1], losses=2)
    stats = await run_sharded(samples, executor, TrajectoryStore(tmp_path), 3, batch_size=5)
    records = _once_and_ok(tmp_path, samples)
    assert stats.batches_retried == 2 and stats.done == 60 and stats.failed == 0
    assert executor.recovered == [1, 1]
    # the two batches that lost worker 1 ran on the others; the rest of shard 1 on its own again
    moved = {t.id for batch in plan_batches(samples, 3, 5)[1][:2] for t in batch}
    assert {records[i].model for i in moved} <= {"http://node0:8000/v1", "http://node2:8000/v1"}
    assert all(
        r.model == f"http://node{shard_of(r.sample_id, 3)}:8000/v1"
        for r in records.values()
        if r.sample_id not in moved
    )


async def test_a_worker_that_never_comes_back_hands_its_batches_to_live_ones(tmp_path: Path) -> None:
    samples = _samples(60)
    fns = [_endpoint_fn(f"http://node{i}:8000/v1") for i in range(3)]
    executor = LosingExecutor(fns, concurrency=4, timeout_s=None, gone=[2])
    seen: list[str] = []
    stats = await run_sharded(
        samples,
        executor,
        TrajectoryStore(tmp_path),
        3,
        batch_size=5,
        on_result=lambda t, s: seen.append(t.sample_id),
    )
    records = _once_and_ok(tmp_path, samples)
    assert sorted(seen) == sorted(records)  # the progress bar hears of each sample once
    shard2 = [s.id for s in samples if shard_of(s.id, 3) == 2]
    assert stats.batches_retried == 1 and executor.recovered == [2]  # asked once, then given up on
    assert {records[i].model for i in shard2} == {"http://node0:8000/v1", "http://node1:8000/v1"}
    assert not any(shard == 2 for shard, _ in executor.ran)


async def test_the_run_stops_resumable_only_when_no_worker_is_left(tmp_path: Path) -> None:
    samples = _samples(40)
    fns = [_endpoint_fn(f"http://node{i}:8000/v1") for i in range(2)]
    executor = LosingExecutor(fns, concurrency=2, timeout_s=None, gone=[0, 1])
    with pytest.raises(NoWorkerLeft, match="no Ray node is left"):
        await run_sharded(samples, executor, TrajectoryStore(tmp_path), 2, batch_size=4)
    assert TrajectoryStore(tmp_path).load() == {}  # nothing recorded as failed: all pending
    stats = await run_sharded(samples, InProcessExecutor(fns, 2, None), TrajectoryStore(tmp_path), 2)
    assert stats.done == 40 and stats.skipped == 0
    _once_and_ok(tmp_path, samples)


async def test_a_batch_that_kills_every_worker_is_recorded_failed_not_retried_forever(tmp_path: Path) -> None:
    samples = _samples(30)
    fns = [_endpoint_fn(f"http://node{i}:8000/v1") for i in range(2)]
    executor = LosingExecutor(fns, concurrency=2, timeout_s=None, poison="id7")
    stats = await run_sharded(samples, executor, TrajectoryStore(tmp_path), 2, batch_size=3)
    records = TrajectoryStore(tmp_path).load()
    failed = {sid for sid, r in records.items() if r.status != TrajectoryStatus.OK}
    assert len(records) == 30 and "id7" in failed and len(failed) <= 3
    assert all(f"lost {MAX_BATCH_ATTEMPTS} times" in records[sid].error for sid in failed)
    assert stats.batches_retried == MAX_BATCH_ATTEMPTS - 1


@pytest.mark.slow
def test_local_ray_cluster_matches_local_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ray = pytest.importorskip("ray", reason="ray not installed: pip install 'geosleuth[ray]'")
    data = make_csv_dataset(tmp_path / "bench")
    plan = {
        sid: {"lat": 10.0 * i, "lon": 5.0 * i, "confidence": 0.5}
        for i, sid in enumerate(["paris", "berlin", "tokyo", "nyc", "sydney", "cairo", "lima", "delhi"])
    }
    plan["tokyo"] = {"raise": "down"}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")  # Ray 2.60's ray.init() would write ~/.ray/auth_token
    runner = CliRunner()
    common = ["--agent-fn", "eval_fake_agent:planned", "--no-report"]
    local = runner.invoke(app, ["eval", str(data), "--out", str(tmp_path / "local"), *common])
    assert local.exit_code == 0, local.output
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        sharded = runner.invoke(
            app,
            ["eval", str(data), "--out", str(tmp_path / "ray"), "--backend", "ray", "--shards", "2", *common],
        )
    finally:
        ray.shutdown()
    assert sharded.exit_code == 0, sharded.output
    summaries = []
    for name in ("local", "ray"):
        result = runner.invoke(app, ["report", str(tmp_path / name), "--json", "--no-html", "--no-plots"])
        summaries.append(json.loads(result.output))
    assert summaries[0]["metrics"] == summaries[1]["metrics"]
    assert summaries[1]["status_counts"] == {"model_error": 1, "ok": 7}


def test_ray_pinning_and_batch_flags_are_checked_before_the_run(tmp_path: Path) -> None:
    from geosleuth.eval.run.config import resolve_config

    runner = CliRunner()
    out = tmp_path / "run"
    ray = ["eval", "x.csv", "--out", str(out), "--backend", "ray"]
    bad = runner.invoke(app, [*ray, "--ray-resource", "gpu"])
    assert bad.exit_code == 2 and "NAME=AMOUNT" in bad.output and not out.exists()
    zero = runner.invoke(app, [*ray, "--ray-batch-size", "0"])
    assert zero.exit_code == 2 and "ray_batch_size" in zero.output
    config = resolve_config({"dataset": "d", "out": "o", "ray_resources": {"eval_node": 0.5}}, {})
    assert config.ray_resources == {"eval_node": 0.5} and config.ray_batch_size == 32


def test_shard_actors_go_round_robin_to_the_alive_nodes_that_can_host_them() -> None:
    from geosleuth.eval.run.ray_backend import hosts

    nodes = [  # shaped like ray.nodes(): a 0-CPU head, a pinned worker, a dead one, a plain one
        {"NodeID": "head", "Alive": True, "Resources": {"CPU": 0.0, "memory": 1e9}},
        {"NodeID": "w2", "Alive": True, "Resources": {"CPU": 8.0, "geosleuth": 100.0}},
        {"NodeID": "w0", "Alive": False, "Resources": {"CPU": 8.0, "geosleuth": 100.0}},
        {"NodeID": "w1", "Alive": True, "Resources": {"CPU": 1.0}},
    ]
    assert hosts(nodes, {}) == ["w1", "w2"]
    assert hosts(nodes, {"geosleuth": 1.0}) == ["w2"]
    assert hosts(nodes, {"geosleuth": 101.0}) == [] and hosts(nodes, {"gpu_node": 1.0}) == []
