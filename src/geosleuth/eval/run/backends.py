"""Scale-out: the same runner semantics with batches executed by remote workers.

The driver owns the run directory: it computes the pending samples, hands batches of
``Task``s (never ground truth) to workers, and appends every returned trajectory to the one
durable log as each batch comes back. A killed driver therefore resumes exactly like a local
run; at most the batches in flight are re-run. A lost worker (its node died or was
preempted) loses nothing either: its batch is run again once the worker is back, or on
another shard's worker, and is recorded once. Workers only need the images (a shared
filesystem or the same paths on every node) and their endpoint. The Ray executor lives in
`geosleuth.eval.run.ray_backend`; this module knows nothing of Ray or of run configs.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.run.runner import (
    Guards,
    ProgressFn,
    RunAborted,
    RunFn,
    RunStats,
    failed_trajectory,
    pending_samples,
    run_one,
)
from geosleuth.eval.run.store import TrajectoryStore

DEFAULT_BATCH = 32
MAX_BATCH_ATTEMPTS = 4
"""A batch whose worker was lost this many times is recorded as failed: it is the batch (a
sample that kills its worker), not the cluster."""

log = logging.getLogger(__name__)


class WorkerLost(Exception):
    """The worker running a batch went away (its node died or was preempted, its process was
    killed): an accident of the infrastructure, so the batch runs again instead of failing."""


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
    run_fn: RunFn,
    tasks: Sequence[Task],
    concurrency: int,
    timeout_s: float | None,
    guards: Guards | None = None,
) -> list[Trajectory]:
    """What a worker does with one batch: the runner's per-sample semantics, bounded concurrency."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task: Task) -> Trajectory:
        async with gate:
            started = time.time()
            try:
                return await run_one(run_fn, task, timeout_s, guards.get(task.id) if guards else None)
            except RunAborted as exc:  # marked, so the driver stops the run (it may sit across Ray)
                aborted = failed_trajectory(task, TrajectoryStatus.MODEL_ERROR, str(exc), started)
                aborted.metadata[ABORTED] = True
                return aborted

    return list(await asyncio.gather(*(one(t) for t in tasks)))


class BatchExecutor(Protocol):
    """Runs batches on shard workers; implemented in-process for tests and by Ray actors."""

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        """The trajectories of ``tasks`` run by worker ``shard``; `WorkerLost` if it went away."""
        ...

    async def recover(self, shard: int) -> bool:
        """Wait until worker ``shard`` takes batches again (True), or give up on it (False)."""
        ...

    async def close(self) -> None: ...


class InProcessExecutor:
    """Each shard is a run function in this process (tests, and a reference for Ray)."""

    def __init__(
        self,
        run_fns: Sequence[RunFn],
        concurrency: int,
        timeout_s: float | None,
        guards: Guards | None = None,
    ) -> None:
        self.run_fns = list(run_fns)
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.guards = guards

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        return await run_batch(self.run_fns[shard], tasks, self.concurrency, self.timeout_s, self.guards)

    async def recover(self, shard: int) -> bool:
        return True

    async def close(self) -> None:
        return None


def lost_batch(tasks: Sequence[Task], error: str) -> list[Trajectory]:
    """Records for a batch no worker could finish: failed, counted wrong, re-run by retry-failed."""
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


class NoWorkerLeft(RunAborted):
    """Every shard's worker is gone and none came back: the cluster has no node left for the run."""


class _Dispatch:
    """Runs one batch to completion across lost workers. A lost worker's batch goes at once to
    another live worker while the lost one recovers in the background (Ray restarts it on a
    live node); once back it takes its own shard's batches again. Only when every worker is
    gone for good does a batch find no worker (`NoWorkerLeft`)."""

    def __init__(self, executor: BatchExecutor, n_shards: int, stats: RunStats) -> None:
        self.executor = executor
        self.n_shards = n_shards
        self.stats = stats
        self.recovering: dict[int, asyncio.Task[None]] = {}
        self.gone: set[int] = set()  # workers that did not come back
        self.turn = 0

    def _lose(self, worker: int) -> None:
        if worker not in self.recovering and worker not in self.gone:
            self.recovering[worker] = asyncio.create_task(self._recover(worker))

    async def _recover(self, worker: int) -> None:
        try:
            back = await self.executor.recover(worker)
        except Exception as exc:  # a recovery that breaks is one that failed
            log.warning("worker %d could not be recovered: %s", worker, exc)
            back = False
        finally:
            del self.recovering[worker]
        if back:
            log.info("worker %d is back", worker)
        else:
            self.gone.add(worker)
            log.warning("worker %d did not come back; it is given up on", worker)

    async def _worker_for(self, home: int) -> int | None:
        while True:
            down = self.gone | set(self.recovering)
            if home not in down:
                return home
            live = [i for i in range(self.n_shards) if i not in down]
            if live:
                self.turn += 1
                return live[self.turn % len(live)]
            if not self.recovering:
                return None
            await asyncio.wait(list(self.recovering.values()), return_when=asyncio.FIRST_COMPLETED)

    async def run(self, home: int, tasks: list[Task]) -> list[Trajectory]:
        """The batch's trajectories; raises `NoWorkerLeft` when no worker can run it."""
        attempts = 0
        while True:
            worker = await self._worker_for(home)
            if worker is None:
                raise NoWorkerLeft(
                    f"every one of the {self.n_shards} worker(s) was lost and none came back: "
                    "no Ray node is left to run the remaining samples (start or add nodes)"
                )
            try:
                return await self.executor.run(worker, tasks)
            except WorkerLost as exc:
                attempts += 1
                if attempts >= MAX_BATCH_ATTEMPTS:
                    return lost_batch(tasks, f"worker lost {attempts} times running this batch: {exc}")
                self.stats.batches_retried += 1
                log.warning("worker %d lost (%s); its batch of %d runs again", worker, exc, len(tasks))
                self._lose(worker)
            except Exception as exc:  # the worker answered with an error: re-running would repeat it
                return lost_batch(tasks, f"worker {worker} failed: {type(exc).__name__}: {exc}")

    async def close(self) -> None:
        """Stop waiting for workers the run no longer needs."""
        waiting = list(self.recovering.values())
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def run_sharded(
    samples: Sequence[Sample],
    executor: BatchExecutor,
    store: TrajectoryStore,
    n_shards: int,
    *,
    batch_size: int = DEFAULT_BATCH,
    retry_failed: bool = False,
    on_result: ProgressFn | None = None,
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
        todo = pending_samples(samples, store.finished_keys())
        stats.skipped = len(samples) - len(todo)
        plan = plan_batches(todo, n_shards, batch_size)
        dispatch = _Dispatch(executor, n_shards, stats)
        lock = asyncio.Lock()
        aborted: list[RunAborted] = []

        async def drive(shard: int) -> None:
            for tasks in plan[shard]:
                if aborted:
                    return
                try:
                    results = await dispatch.run(shard, tasks)
                except NoWorkerLeft as exc:  # unrecorded, so that the same command resumes them
                    aborted.append(exc)
                    return
                stopped = [t for t in results if t.metadata.get(ABORTED)]
                if stopped:  # unrecorded, so that re-running after the fix resumes them
                    aborted.append(RunAborted(stopped[0].error or "the endpoint refused the run"))
                    results = [t for t in results if not t.metadata.get(ABORTED)]
                async with lock:
                    await asyncio.to_thread(store.append, results)
                for trajectory in results:
                    stats.done += 1
                    stats.failed += trajectory.status != TrajectoryStatus.OK
                    key = trajectory.status.value
                    stats.statuses[key] = stats.statuses.get(key, 0) + 1
                    if on_result is not None:
                        on_result(trajectory, stats)

        try:
            await asyncio.gather(*(drive(i) for i in range(n_shards)))
        finally:
            await dispatch.close()
        if aborted:
            raise aborted[0]
    finally:
        store.close()
        await executor.close()
        stats.wall_s = time.perf_counter() - started
    return stats
