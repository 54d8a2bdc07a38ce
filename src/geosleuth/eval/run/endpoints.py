"""Where a run's model requests go: one reading of ``model``, ``base_url``, ``endpoints`` and
``shards`` for every backend, so one config file means the same run wherever it executes.

A run is split into shards by a stable hash of each sample id (`geosleuth.eval.run.backends.shard_of`);
shard ``i`` talks to ``endpoints[i % len(endpoints)]`` (``base_url``, or the client's default,
when no ``endpoints`` are given) and runs up to ``concurrency`` samples at once. The Ray backend
runs each shard as an actor, the local backend runs every shard in its one process, and a job
of a job array (``--shard I/N``) runs shard ``I`` of ``N`` alone. Settings a backend cannot honour
are refused by `plan_lanes` before the first request.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from geosleuth.core.records import Task, Trajectory
from geosleuth.eval.run.backends import shard_of
from geosleuth.eval.run.config import ConfigError, EvalConfig
from geosleuth.eval.run.runner import RunFn

log = logging.getLogger(__name__)

RAY_ONLY = ("ray_address", "ray_batch_size", "ray_resources", "ray_restart_wait_s")
"""Settings of the Ray backend alone (the name says so): another backend leaves them unused."""


@dataclass(frozen=True)
class Lanes:
    """The shards one process runs: ``endpoints[k]`` is the base URL of its k-th shard
    (``None``: the client's default), ``count`` the run's number of shards in all."""

    endpoints: tuple[str | None, ...]
    count: int

    def endpoint_of(self, sample_id: str) -> str | None:
        """The base URL the requests of this sample go to."""
        return self.endpoints[shard_of(sample_id, self.count) % len(self.endpoints)]


def plan_lanes(config: EvalConfig) -> Lanes:
    """The shards this process runs and their endpoints; `ConfigError` for a setting this
    backend cannot honour, before anything is sent."""
    problems = refused_settings(config)
    if problems:
        raise ConfigError("invalid eval config: " + "; ".join(problems))
    urls: list[str | None] = list(config.endpoints) or [config.base_url]
    if config.shard_spec is not None:
        index, count = config.shard_spec
        return Lanes((urls[index % len(urls)],), count)
    count = config.shards or len(urls)
    return Lanes(tuple(urls[k % len(urls)] for k in range(count)), count)


def refused_settings(config: EvalConfig) -> list[str]:
    """Why this config cannot run as written (empty when it can)."""
    problems: list[str] = []
    if config.endpoints and config.base_url:
        problems.append("endpoints and base_url both name the model server: give one of them")
    if config.endpoints and config.agent_fn:
        problems.append(f"endpoints: agent_fn {config.agent_fn} replaces the agent and sends no requests")
    elif config.endpoints and not config.model:
        problems.append("endpoints: no model is named, and the offline pipeline sends no requests")
    if config.shards is not None and config.shard_spec is not None and config.shard_spec[1] != config.shards:
        problems.append(
            f"shards: {config.shards} and --shard {config.shard} split the samples differently: "
            f"give --shard I/{config.shards} (or drop shards)"
        )
    if config.backend != "ray":
        unused = [k for k in RAY_ONLY if k in config.model_fields_set]
        if unused:
            log.warning("backend %s: %s apply to --backend ray only", config.backend, ", ".join(unused))
    return problems


class LaneRouter:
    """The local backend's run function over several shards: each sample goes to its shard's
    run function, and each shard runs at most ``concurrency`` samples at once, as a Ray actor does."""

    def __init__(self, lanes: Lanes, run_fns: Sequence[RunFn], concurrency: int) -> None:
        self.lanes = lanes
        self.run_fns = list(run_fns)
        self.gates = [asyncio.Semaphore(concurrency) for _ in run_fns]

    async def __call__(self, task: Task) -> Trajectory:
        shard = shard_of(task.id, self.lanes.count) % len(self.run_fns)
        async with self.gates[shard]:
            return await self.run_fns[shard](task)

    async def aclose(self) -> None:
        for run_fn in self.run_fns:
            close = getattr(run_fn, "aclose", None)
            if close is not None:
                await close()
