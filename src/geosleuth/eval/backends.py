"""Scale-out: the same runner semantics with batches executed by remote workers (Ray).

The driver owns the run directory: it computes the pending samples, hands batches of
``Task``s (never ground truth) to workers, and appends every returned trajectory to the one
durable log as each batch comes back. A killed driver therefore resumes exactly like a local
run; at most the batches in flight are re-run. Workers only need the images (a shared
filesystem or the same paths on every node) and their endpoint.

Imports flow one way: `geosleuth.eval.run` builds the run functions and calls this module,
which knows nothing of run configs.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.runner import (
    RunAborted,
    RunFn,
    RunStats,
    failed_trajectory,
    pending_samples,
    run_one,
)
from geosleuth.eval.store import TrajectoryStore

DEFAULT_BATCH = 32


def shard_of(sample_id: str, n_shards: int) -> int:
    """Stable shard index of an id (the same on every machine and every resume)."""
    digest = hashlib.sha1(sample_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") % n_shards


def plan_batches(samples: Sequence[Sample], n_shards: int, batch_size: int) -> list[list[list[Task]]]:
    """Per shard, the list of task batches it should run (ground truth stripped)."""
    if n_shards < 1 or batch_size < 1:
        raise ValueError("shards and batch size must be at least 1")
    shards: list[list[Task]] = [[] for _ in range(n_shards)]
    for sample in samples:
        shards[shard_of(sample.id, n_shards)].append(Task.from_sample(sample))
    return [[tasks[i : i + batch_size] for i in range(0, len(tasks), batch_size)] for tasks in shards]


ABORTED = "run_aborted"  # trajectory metadata: the sample met an error every sample would meet


async def run_batch(
    run_fn: RunFn, tasks: Sequence[Task], concurrency: int, timeout_s: float | None
) -> list[Trajectory]:
    """What a worker does with one batch: the runner's per-sample semantics, bounded concurrency."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task: Task) -> Trajectory:
        async with gate:
            started = time.time()
            try:
                return await run_one(run_fn, task, timeout_s)
            except RunAborted as exc:  # marked, so the driver stops the run (it may sit across Ray)
                aborted = failed_trajectory(task, TrajectoryStatus.MODEL_ERROR, str(exc), started)
                aborted.metadata[ABORTED] = True
                return aborted

    return list(await asyncio.gather(*(one(t) for t in tasks)))


class BatchExecutor(Protocol):
    """Runs one batch on worker ``shard``; implemented in-process for tests and by Ray actors."""

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]: ...

    async def close(self) -> None: ...


class InProcessExecutor:
    """Each shard is a run function in this process (tests, and a reference for Ray)."""

    def __init__(self, run_fns: Sequence[RunFn], concurrency: int, timeout_s: float | None) -> None:
        self.run_fns = list(run_fns)
        self.concurrency = concurrency
        self.timeout_s = timeout_s

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        return await run_batch(self.run_fns[shard], tasks, self.concurrency, self.timeout_s)

    async def close(self) -> None:
        return None


def lost_batch(tasks: Sequence[Task], error: str) -> list[Trajectory]:
    """Records for a batch whose worker died: failed, so they count wrong and retry-failed re-runs them."""
    now = time.time()
    return [
        Trajectory(
            sample_id=t.id,
            model="",
            status=TrajectoryStatus.MODEL_ERROR,
            error=error,
            started_at=now,
            finished_at=now,
        )
        for t in tasks
    ]


async def run_sharded(
    samples: Sequence[Sample],
    executor: BatchExecutor,
    store: TrajectoryStore,
    n_shards: int,
    *,
    batch_size: int = DEFAULT_BATCH,
    retry_failed: bool = False,
) -> RunStats:
    """Dispatch pending samples shard by shard and merge results into one durable log."""
    stats = RunStats(total=len(samples))
    started = time.perf_counter()
    store.open()
    try:
        if retry_failed:
            store.close()
            stats.retried = len(store.drop_failed())
            store.open()
        todo = pending_samples(samples, set(store.statuses()))
        stats.skipped = len(samples) - len(todo)
        plan = plan_batches(todo, n_shards, batch_size)
        lock = asyncio.Lock()
        aborted: list[str] = []

        async def drive(shard: int) -> None:
            for tasks in plan[shard]:
                if aborted:
                    return
                try:
                    results = await executor.run(shard, tasks)
                except Exception as exc:  # a dead worker loses its batch, never the run
                    results = lost_batch(tasks, f"worker {shard} failed: {type(exc).__name__}: {exc}")
                stopped = [t for t in results if t.metadata.get(ABORTED)]
                if stopped:  # unrecorded, so that re-running after the fix resumes them
                    aborted.append(stopped[0].error or "the endpoint refused the run")
                    results = [t for t in results if not t.metadata.get(ABORTED)]
                async with lock:
                    await asyncio.to_thread(store.append, results)
                for trajectory in results:
                    stats.done += 1
                    stats.failed += trajectory.status != TrajectoryStatus.OK
                    key = trajectory.status.value
                    stats.statuses[key] = stats.statuses.get(key, 0) + 1

        await asyncio.gather(*(drive(i) for i in range(n_shards)))
        if aborted:
            raise RunAborted(aborted[0])
    finally:
        store.close()
        await executor.close()
        stats.wall_s = time.perf_counter() - started
    return stats


class _RayShardWorker:
    """Body of the Ray actor: one run function (and connection pool) per worker process."""

    def __init__(self, run_fn: RunFn, concurrency: int, timeout_s: float | None) -> None:
        self.run_fn = run_fn
        self.concurrency = concurrency
        self.timeout_s = timeout_s

    async def run(self, tasks_json: list[str]) -> list[str]:
        tasks = [Task.model_validate_json(t) for t in tasks_json]
        results = await run_batch(self.run_fn, tasks, self.concurrency, self.timeout_s)
        return [r.model_dump_json() for r in results]


class RayExecutor:
    """One Ray actor per shard; batches travel as JSON (tasks out, trajectories back)."""

    def __init__(
        self, run_fns: Sequence[RunFn], concurrency: int, timeout_s: float | None, address: str | None
    ) -> None:
        import ray

        if not ray.is_initialized():
            ray.init(address=address, ignore_reinit_error=True, log_to_driver=False)
        actor = ray.remote(_RayShardWorker)
        self.actors: list[Any] = [actor.remote(fn, concurrency, timeout_s) for fn in run_fns]

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        payload = [t.model_dump_json() for t in tasks]
        results = await self.actors[shard].run.remote(payload)
        return [Trajectory.model_validate_json(r) for r in results]

    async def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)


class RayBackend:
    """``--backend ray``: one Ray actor per run function (one per endpoint, or ``--shards``)."""

    def __init__(self, address: str | None = None, batch_size: int = DEFAULT_BATCH) -> None:
        self.address = address
        self.batch_size = batch_size

    async def run(
        self,
        samples: Sequence[Sample],
        run_dir: Path,
        run_fns: Sequence[RunFn],
        *,
        concurrency: int,
        timeout_s: float | None,
        retry_failed: bool = False,
    ) -> RunStats:
        """Run the pending ``samples`` into ``run_dir``; shard i runs on ``run_fns[i]``."""
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ValueError("--backend ray needs Ray: pip install 'geosleuth[ray]'") from exc
        executor = RayExecutor(run_fns, concurrency, timeout_s, self.address)
        store = TrajectoryStore(run_dir)
        return await run_sharded(
            samples, executor, store, len(run_fns), batch_size=self.batch_size, retry_failed=retry_failed
        )
