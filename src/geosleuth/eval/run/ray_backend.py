"""``--backend ray``: shard workers as Ray actors, spread over the nodes, surviving node loss.

Each shard is one actor, placed round robin over the alive nodes that can host it (soft node
affinity: Ray's ``SPREAD`` alone is best effort and was seen to put every shard on one node)
and created with ``max_restarts=-1`` (Ray brings an actor whose node died back on a live node). Its
in-flight batch fails with a Ray actor error, which becomes `WorkerLost`: the dispatcher in
`geosleuth.eval.run.backends` runs the batch again on another shard's actor at once and gives the
lost actor its shard back once `RayExecutor.recover` sees it restarted. Ray's own task retries
stay off (``max_task_retries=0``) so that the driver sees, counts and records every retry once.
``resources`` pins the actors to the nodes that advertise a custom resource
(``ray start --resources '{"geosleuth": 100}'``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from geosleuth.bounds.extras import install_line
from geosleuth.core.records import Sample, Task, Trajectory
from geosleuth.eval.run.backends import DEFAULT_BATCH, WorkerLost, run_batch, run_sharded
from geosleuth.eval.run.runner import Guards, ProgressFn, RunFn, RunStats
from geosleuth.eval.run.store import TrajectoryStore

DEFAULT_RESTART_WAIT_S = 120.0
"""How long a lost actor may take to come back (node death detection plus a restart elsewhere)
before it is given up on; meanwhile the other shards' actors take its batches."""

log = logging.getLogger(__name__)


class _RayShardWorker:
    """Body of the Ray actor: one run function (and connection pool) per worker process."""

    def __init__(
        self, run_fn: RunFn, concurrency: int, timeout_s: float | None, guards: Guards | None = None
    ) -> None:
        self.run_fn = run_fn
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.guards = guards

    async def run(self, tasks_json: list[str]) -> list[str]:
        tasks = [Task.model_validate_json(t) for t in tasks_json]
        results = await run_batch(self.run_fn, tasks, self.concurrency, self.timeout_s, self.guards)
        return [r.model_dump_json() for r in results]

    def ping(self) -> bool:
        return True


def _lost_errors() -> tuple[type[BaseException], ...]:
    """Ray's errors for a worker (not the code it ran) that went away: worth running again."""
    from ray import exceptions as rex

    return (
        rex.RayActorError,  # ActorDiedError, ActorUnavailableError
        rex.WorkerCrashedError,
        rex.NodeDiedError,
        rex.ObjectLostError,  # a finished batch's result was on the node that died
        rex.OutOfMemoryError,
        rex.LocalRayletDiedError,
        rex.ActorUnschedulableError,
    )


def _needs(resources: Mapping[str, float]) -> dict[str, float]:
    return {"CPU": 1.0, **resources}  # an actor needs 1 CPU to be placed (0 once running)


def hosts(nodes: Sequence[Mapping[str, Any]], resources: Mapping[str, float]) -> list[str]:
    """Ids of the alive nodes (``ray.nodes()`` entries) with room for one actor, in a stable order."""
    need = _needs(resources)
    return sorted(
        str(node["NodeID"])
        for node in nodes
        if node.get("Alive") and all(node.get("Resources", {}).get(k, 0) >= v for k, v in need.items())
    )


def _schedulable(resources: Mapping[str, float]) -> dict[str, float]:
    """A node's resources without the memory figures and ``node:`` labels Ray adds to each."""
    return {k: v for k, v in resources.items() if "memory" not in k and not k.startswith("node:")}


def _placements(n: int, resources: Mapping[str, float]) -> list[Any]:
    """A scheduling strategy per actor: shard i on the i-th (mod N) host, softly, so that a
    restart after that node's loss goes to any live node. No host at all is an error: the
    actors would wait forever for a node with those resources."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = ray.nodes()
    ids = hosts(nodes, resources)
    if not ids:
        offered = "; ".join(
            f"{node.get('NodeManagerAddress', '?')} has {_schedulable(node.get('Resources', {}))}"
            for node in nodes
            if node.get("Alive")
        )
        raise ValueError(
            f"no alive Ray node can host a shard actor, which needs {_needs(resources)} "
            f"({offered or 'none is alive'}); "
            "start nodes with a CPU and the --resources the actors are pinned to"
        )
    return [NodeAffinitySchedulingStrategy(ids[i % len(ids)], soft=True) for i in range(n)]


def _route_cluster_errors_to_log() -> None:
    """Ray prints every error the cluster pushes to drivers on stdout: a dead raylet's last log
    lines come as some 36 lines of ``[state-dump]`` internals. Send them to this module's logger
    (first line at INFO, the whole text at DEBUG) so stdout stays ours (``--json``) and stderr
    says what the run does about it."""
    from ray._private import worker

    if not callable(getattr(worker, "print_to_stdstream", None)):  # a Ray without this hook
        return

    def to_log(data: dict[str, Any], ignore_prefix: bool = False) -> None:
        for text in data.get("lines", []):
            log.info("ray %s: %s", data.get("pid", ""), (str(text).strip().splitlines() or [""])[0])
            log.debug("%s", text)

    worker.print_to_stdstream = to_log


def connect(address: str | None) -> None:
    """Join the cluster at ``address`` (or start a local one), with readable driver output."""
    import ray
    from ray.exceptions import AuthenticationError

    if ray.is_initialized():
        return
    same_auth = (
        "every node and this shell need the same RAY_AUTH_MODE (and, for token, the same token): "
        "docs/evaluation.md, 'Start Ray'"
    )
    try:
        ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except AuthenticationError as exc:
        raise ValueError(f"cannot join the Ray cluster at {address}: {exc.message}; {same_auth}") from None
    except ConnectionError as exc:
        raise ValueError(f"cannot join the Ray cluster at {address}: {exc} (is it up? {same_auth})") from None
    _route_cluster_errors_to_log()


class RayExecutor:
    """One restartable Ray actor per shard, spread over the nodes; batches travel as JSON (tasks
    out, trajectories back)."""

    def __init__(
        self,
        run_fns: Sequence[RunFn],
        concurrency: int,
        timeout_s: float | None,
        address: str | None,
        *,
        resources: Mapping[str, float] | None = None,
        restart_wait_s: float = DEFAULT_RESTART_WAIT_S,
        guards: Guards | None = None,
    ) -> None:
        import ray

        connect(address)
        self.lost = _lost_errors()
        self.restart_wait_s = restart_wait_s
        options: dict[str, Any] = {"max_restarts": -1, "max_task_retries": 0}
        if resources:
            options["resources"] = dict(resources)
        actor = ray.remote(_RayShardWorker)
        self.actors: list[Any] = [
            actor.options(scheduling_strategy=where, **options).remote(fn, concurrency, timeout_s, guards)
            for fn, where in zip(run_fns, _placements(len(run_fns), resources or {}), strict=True)
        ]

    async def run(self, shard: int, tasks: list[Task]) -> list[Trajectory]:
        payload = [t.model_dump_json() for t in tasks]
        try:
            results = await self.actors[shard].run.remote(payload)
        except self.lost as exc:
            raise WorkerLost(f"{type(exc).__name__}: {_first_line(exc)}") from exc
        return [Trajectory.model_validate_json(r) for r in results]

    async def recover(self, shard: int) -> bool:
        """Ping the actor until Ray has restarted it on a live node, for at most ``restart_wait_s``."""
        deadline = time.monotonic() + self.restart_wait_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                return bool(await asyncio.wait_for(self.actors[shard].ping.remote(), left))
            except TimeoutError:
                return False
            except self.lost:
                await asyncio.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
        return False

    async def close(self) -> None:
        import ray

        for actor in self.actors:
            ray.kill(actor)


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:300]


class RayBackend:
    """``--backend ray``: one Ray actor per run function (one per endpoint, or ``--shards``)."""

    def __init__(
        self,
        address: str | None = None,
        batch_size: int = DEFAULT_BATCH,
        *,
        resources: Mapping[str, float] | None = None,
        restart_wait_s: float = DEFAULT_RESTART_WAIT_S,
    ) -> None:
        self.address = address
        self.batch_size = batch_size
        self.resources = resources
        self.restart_wait_s = restart_wait_s

    async def run(
        self,
        samples: Sequence[Sample],
        run_dir: Path,
        run_fns: Sequence[RunFn],
        *,
        concurrency: int,
        timeout_s: float | None,
        retry_failed: bool = False,
        on_result: ProgressFn | None = None,
        guards: Guards | None = None,
    ) -> RunStats:
        """Run the pending ``samples`` into ``run_dir``; shard i runs on ``run_fns[i]``."""
        try:
            import ray  # noqa: F401
        except ImportError as exc:
            raise ValueError(f"--backend ray needs Ray: {install_line('ray')}") from exc
        executor = RayExecutor(
            run_fns,
            concurrency,
            timeout_s,
            self.address,
            resources=self.resources,
            restart_wait_s=self.restart_wait_s,
            guards=guards,
        )
        store = TrajectoryStore(run_dir)
        return await run_sharded(
            samples,
            executor,
            store,
            len(run_fns),
            batch_size=self.batch_size,
            retry_failed=retry_failed,
            on_result=on_result,
        )
