"""Resumable, bounded-concurrency evaluation over any async ``(Task) -> Trajectory`` callable.

Ground truth never reaches the run function: it only receives ``Task.from_sample``. Every
sample ends as exactly one record: an exception or a timeout becomes a failed trajectory
(counted wrong by the report), never a missing line.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from geosleuth.bounds.deadline import STARTUP_TIMEOUT_S, SampleClock, reset_clock, set_clock
from geosleuth.core.records import Sample, Task, Trajectory, TrajectoryStatus
from geosleuth.eval.datasets.spool import SampleSpool
from geosleuth.eval.run.store import TrajectoryStore, is_finished
from geosleuth.tools.leakguard import GuardSpec, guarding

RunFn = Callable[[Task], Awaitable[Trajectory]]
ProgressFn = Callable[[Trajectory, "RunStats"], None]
Guards = Mapping[str, GuardSpec]
"""Sample id -> how its search and POI results are screened (`geosleuth.tools.leakguard`)."""
GuardFn = Callable[[Sample], GuardSpec]
"""A sample's screen, built when the sample runs (`geosleuth.eval.run.pipeline.SampleGuards`)."""
BLOCKED = "search_results_blocked"  # trajectory metadata: results the sample's leak guard dropped


@dataclass
class RunStats:
    """What one invocation of the runner did."""

    total: int = 0
    skipped: int = 0  # already finished in the run directory
    retried: int = 0  # failed records moved aside by retry-failed
    batches_retried: int = 0  # scale-out batches run again because their worker was lost
    done: int = 0
    failed: int = 0
    wall_s: float = 0.0
    statuses: dict[str, int] = field(default_factory=dict)


class RunAborted(Exception):
    """A run function's verdict that every further sample would fail the same way (a rejected
    API key, an unknown model, an endpoint that never answered): the batch stops, and the sample
    that raised it gets no record, so re-running the command after the fix resumes there."""


def failed_trajectory(task: Task, status: TrajectoryStatus, error: str, started: float) -> Trajectory:
    """The record of a sample whose run function raised or timed out."""
    return Trajectory(
        sample_id=task.id, model="", status=status, error=error, started_at=started, finished_at=time.time()
    )


async def run_one(
    run_fn: RunFn, task: Task, timeout_s: float | None, guard: GuardSpec | None = None
) -> Trajectory:
    """Run one task; exceptions and timeouts become failed records with their cause.

    ``timeout_s`` counts from the task's first model request when its agent defers the clock
    (the built-in agent does; see `geosleuth.bounds.deadline`), else from its start. With a ``guard``
    the task's tool results are screened and the record counts what was dropped.
    """
    if guard is None:
        return await _run_one(run_fn, task, timeout_s)
    screen = guard.start()
    with guarding(screen):
        trajectory = await _run_one(run_fn, task, timeout_s)
    return trajectory.model_copy(update={"metadata": {**trajectory.metadata, BLOCKED: screen.blocked}})


async def _run_one(run_fn: RunFn, task: Task, timeout_s: float | None) -> Trajectory:
    started = time.time()
    clock = SampleClock()
    try:
        if timeout_s is None:
            trajectory = await run_fn(task)
        else:
            trajectory = await _within(run_fn, task, clock, timeout_s)
    except TimeoutError:
        if clock.started_at is not None:
            why = f"no result within {timeout_s} s of the first model request"
        elif clock.deferred:
            why = f"no model request within {max(timeout_s or 0, STARTUP_TIMEOUT_S):g} s of start-up"
        else:
            why = f"no result within {timeout_s} s"
        return failed_trajectory(task, TrajectoryStatus.TIMEOUT, why, started)
    except RunAborted:
        raise
    except Exception as exc:  # any failure of the agent is a result, not a crash of the batch
        detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        return failed_trajectory(task, TrajectoryStatus.MODEL_ERROR, detail, started)
    if not isinstance(trajectory, Trajectory):
        return failed_trajectory(
            task, TrajectoryStatus.MODEL_ERROR, f"run function returned {type(trajectory).__name__}", started
        )
    if trajectory.sample_id != task.id:
        trajectory = trajectory.model_copy(update={"sample_id": task.id})
    if trajectory.started_at is None or trajectory.finished_at is None:
        trajectory = trajectory.model_copy(
            update={
                "started_at": trajectory.started_at or started,
                "finished_at": trajectory.finished_at or time.time(),
            }
        )
    return trajectory


async def _within(run_fn: RunFn, task: Task, clock: SampleClock, timeout_s: float) -> Trajectory:
    """``run_fn(task)`` under ``clock``'s deadline, re-read whenever the clock starts."""
    token = set_clock(clock)
    try:
        running = asyncio.ensure_future(run_fn(task))  # the task's context carries the clock
    finally:
        reset_clock(token)
    loop = asyncio.get_running_loop()
    began = loop.time()
    started = asyncio.ensure_future(clock.started.wait())
    try:
        while not running.done():
            remaining = clock.deadline(began, timeout_s) - loop.time()
            if remaining <= 0:
                running.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await running
                raise TimeoutError
            waiting = {running} if started.done() else {running, started}
            await asyncio.wait(waiting, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        return running.result()
    finally:
        started.cancel()
        if not running.done():  # this coroutine was cancelled from outside
            running.cancel()


ID_BATCH = 8192  # ids digested and tested against the finished keys at a time
PENDING_WRITES = 256
"""Finished trajectories that may wait for the writer (memory stays flat however fast agents answer)."""


def pending_positions(samples: Sequence[Sample], finished: NDArray[np.bytes_]) -> NDArray[np.intp]:
    """Positions of the samples without a finished record (``finished``:
    `TrajectoryStore.finished_keys`), tested in batches so no list of every id is built."""
    ids = samples.ids() if isinstance(samples, SampleSpool) else (s.id for s in samples)
    done = np.zeros(len(samples), dtype=bool)
    for start in range(0, len(samples), ID_BATCH):
        batch = list(itertools.islice(ids, ID_BATCH))
        done[start : start + len(batch)] = is_finished(batch, finished)
    return np.flatnonzero(~done)


def pending_samples(samples: Sequence[Sample], finished: NDArray[np.bytes_]) -> list[Sample]:
    """The samples without a finished record (``finished``: `TrajectoryStore.finished_keys`)."""
    return [samples[int(i)] for i in pending_positions(samples, finished)]


async def _writer(
    store: TrajectoryStore, queue: asyncio.Queue[Trajectory | None], on_written: ProgressFn, stats: RunStats
) -> None:
    """Group commit: write everything that is ready, fsync once, then report it done.

    After a failed write the queue is still drained (the workers' puts never block on a bounded
    queue nobody reads) and the error is raised once the run's last result has come in."""
    failure: BaseException | None = None
    while True:
        item = await queue.get()
        batch: list[Trajectory] = []
        stop = item is None
        if item is not None:
            batch.append(item)
        while not queue.empty():
            more = queue.get_nowait()
            if more is None:
                stop = True
            else:
                batch.append(more)
        if batch and failure is None:
            try:
                await _commit(store, batch, on_written, stats)
            except Exception as exc:  # noqa: BLE001 - raised below, once the workers have stopped
                failure = exc
        if stop:
            if failure is not None:
                raise failure
            return


async def _commit(
    store: TrajectoryStore, batch: list[Trajectory], on_written: ProgressFn, stats: RunStats
) -> None:
    await asyncio.to_thread(store.append, batch)
    for trajectory in batch:
        stats.done += 1
        stats.statuses[trajectory.status.value] = stats.statuses.get(trajectory.status.value, 0) + 1
        if trajectory.status != TrajectoryStatus.OK:
            stats.failed += 1
        on_written(trajectory, stats)


async def run_samples(
    samples: Sequence[Sample],
    run_fn: RunFn,
    run_dir: Path,
    *,
    concurrency: int = 8,
    timeout_s: float | None = None,
    retry_failed: bool = False,
    on_result: ProgressFn | None = None,
    guards: GuardFn | None = None,
) -> RunStats:
    """Run every sample not yet finished in ``run_dir``; append one durable record per sample.

    Pending samples are held as positions and read from ``samples`` when a worker takes one, so a
    spooled dataset (`geosleuth.eval.datasets.spool`) is never loaded whole."""
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    store = TrajectoryStore(run_dir)
    store.open()
    stats = RunStats(total=len(samples))
    started = time.perf_counter()
    try:
        if retry_failed:
            store.close()
            stats.retried = len(store.drop_failed())
            store.open()
        todo = pending_positions(samples, store.finished_keys())
        stats.skipped = len(samples) - len(todo)
        cursor = iter(todo)  # one event loop: workers take the next position in turn
        # bounded: when the writer falls behind, workers wait instead of piling up finished records
        results: asyncio.Queue[Trajectory | None] = asyncio.Queue(maxsize=max(PENDING_WRITES, concurrency))

        aborted: list[RunAborted] = []

        async def worker() -> None:
            while not aborted and (position := next(cursor, None)) is not None:
                sample = samples[int(position)]
                try:
                    guard = guards(sample) if guards else None
                    trajectory = await run_one(run_fn, Task.from_sample(sample), timeout_s, guard)
                except RunAborted as exc:
                    aborted.append(exc)
                    return
                await results.put(trajectory)

        writer = asyncio.create_task(_writer(store, results, on_result or (lambda t, s: None), stats))
        workers = [asyncio.create_task(worker()) for _ in range(min(concurrency, max(len(todo), 1)))]
        try:
            await asyncio.gather(*workers)
        finally:
            await results.put(None)
            await writer
            close = getattr(run_fn, "aclose", None)
            if close is not None:
                await close()
        if aborted:
            raise aborted[0]
    finally:
        store.close()
        stats.wall_s = time.perf_counter() - started
    return stats
