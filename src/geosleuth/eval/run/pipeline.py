"""One evaluation end to end: config → dataset → run directory → backend → report.

A run directory holds everything needed to report and resume without the original data:
``run.json`` (provenance), ``samples.jsonl`` (ground truth), ``trajectories.jsonl``.
"""

from __future__ import annotations

import contextlib
import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosleuth.core.records import Sample, Task, Trajectory
from geosleuth.eval.datasets.frozen import (
    FrozenMismatch,
    check_frozen,
    image_conflicts,
    image_metadata_entries,
    image_sha256,
    image_sha256_entries,
    read_frozen,
    run_image_hashes,
)
from geosleuth.eval.datasets.layouts import SOURCE_HOSTS
from geosleuth.eval.datasets.loading import Dataset, DatasetError, detect_format, load_dataset
from geosleuth.eval.datasets.spool import SampleSpool
from geosleuth.eval.report.scores import protocol_for
from geosleuth.eval.run.backends import shard_of
from geosleuth.eval.run.config import (
    MANIFEST,
    SAMPLES,
    SHARD_POSITIONS,
    EvalConfig,
    StreamedDict,
    build_manifest,
    shard_dir,
    write_manifest,
)
from geosleuth.eval.run.endpoints import LaneRouter, Lanes, plan_lanes
from geosleuth.eval.run.runlock import LOCK_FILE, run_lock
from geosleuth.eval.run.runner import Guards, ProgressFn, RunAborted, RunFn, RunStats, run_samples
from geosleuth.eval.run.store import TRAJECTORIES, RunDirError, write_atomic, write_atomic_lines
from geosleuth.eval.run.styles import choose_style
from geosleuth.plugins import load_callable
from geosleuth.tools.leakguard import GuardMode, GuardSpec, sample_needles


@dataclass
class PreparedRun:
    config: EvalConfig
    run_dir: Path
    dataset: Dataset
    samples: Sequence[Sample]
    lanes: Lanes
    guards: SampleGuards | None = None  # how each sample's search / POI results are screened
    created: bool = False  # this invocation made the run directory's files (none were there)


def load_agent_fn(spec: str) -> RunFn:
    """Import ``module:function`` (an async ``(Task) -> Trajectory``)."""
    return load_callable(spec, "agent function")


def agent_settings(config: EvalConfig, base_url: str | None = None) -> dict[str, Any]:
    """AgentConfig fields from the eval config: explicit flags over the ``agent`` table."""
    explicit = {
        "model": config.model,
        "base_url": base_url or config.base_url,
        "api_key_env": config.api_key_env,
        "prompt_style": config.prompt,
        "tools": config.tools,
        "samples": config.samples if config.samples != 1 else None,
        "verifier_model": config.verifier,
        "verifier_view": config.verifier_view,
        "max_turns": config.max_turns,
        "temperature": config.temperature,
        "tool_calling": config.tool_calling,
        "resize_factor": config.resize_factor,
        "observer": config.observer,
        "observer_base_url": config.observer_base_url,
        "max_tokens": config.max_tokens,
        "reasoning_effort": config.reasoning_effort,
        "provider": config.provider,
        "pixels_only": not config.allow_metadata,
    }
    return {**config.agent, **{k: v for k, v in explicit.items() if v is not None}}


class AgentRunner:
    """A picklable ``(Task) -> Trajectory`` around the agent, so Ray workers can receive it.

    The HTTP client and tool registry are created on first use inside the running event loop
    and shared by every task of that loop (one connection pool per worker).
    """

    def __init__(self, settings: dict[str, Any], artifacts_dir: Path) -> None:
        self.settings = settings
        self.artifacts_dir = artifacts_dir
        self._shared: tuple[Any, Any, Any, Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"settings": self.settings, "artifacts_dir": self.artifacts_dir, "_shared": None}

    def _resources(self) -> tuple[Any, Any, Any, Any]:
        from geosleuth.agent import AgentConfig, load_style
        from geosleuth.agent.client import make_client
        from geosleuth.agent.observer import make_observer
        from geosleuth.agent.runner import build_tool_registry

        if self._shared is None:
            config = AgentConfig.model_validate(self.settings)
            if config.model is None:
                self._shared = (config, None, None, None)
            else:
                registry = build_tool_registry(config, load_style(config.prompt_style))
                self._shared = (config, make_client(config), registry, make_observer(config))
        return self._shared

    async def __call__(self, task: Task) -> Trajectory:
        from geosleuth.agent import run_task

        config, client, registry, observer = self._resources()
        trajectory = await run_task(
            task,
            config,
            artifacts_dir=self.artifacts_dir,
            client=client,
            registry=registry,
            observer=observer,
        )
        for chat in (client, getattr(observer, "client", None)):  # the model, and an observing model
            if chat is not None and chat.fatal_error is not None:
                raise RunAborted(str(chat.fatal_error))
        return trajectory

    async def aclose(self) -> None:
        if self._shared is not None:
            for resource in self._shared[1::2]:  # the client and the observer
                if resource is not None:
                    await resource.aclose()
        self._shared = None


def build_run_fn(config: EvalConfig, run_dir: Path, base_url: str | None = None) -> RunFn:
    """The agent (or the ``agent_fn`` replacement) configured for this run."""
    if config.agent_fn:
        return load_agent_fn(config.agent_fn)
    return AgentRunner(checked_agent_settings(config, base_url), run_dir)


def checked_agent_settings(config: EvalConfig, base_url: str | None = None) -> dict[str, Any]:
    """The built-in agent's settings, validated (so bad flags fail before the run directory exists)."""
    try:
        import geosleuth.agent  # noqa: F401
    except ImportError as exc:
        raise ValueError(f"the agent is not available ({exc}); pass --agent-fn module:function") from exc
    from pydantic import ValidationError

    from geosleuth.agent import AgentConfig

    settings = agent_settings(config, base_url)
    if settings.get("observer") and not settings.get("model"):
        raise ValueError("--observer describes images to a text-only --model: give --model too")
    try:
        config = AgentConfig.model_validate(settings)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'agent'}: {e['msg'].removeprefix('Value error, ')}"
            for e in exc.errors()
        )
        raise ValueError(f"invalid agent settings: {problems}") from exc
    if config.model is not None:
        from geosleuth.agent import load_style

        load_style(config.prompt_style)  # an unknown style fails here, not once per sample
    return settings


def write_samples(run_dir: Path, samples: Sequence[Sample]) -> None:
    """samples.jsonl, streamed (a spool's lines are copied as they are, never re-encoded)."""
    lines = (
        samples.lines()
        if isinstance(samples, SampleSpool)
        else (s.model_dump_json().encode() + b"\n" for s in samples)
    )
    write_atomic_lines(run_dir / SAMPLES, lines)


def read_samples(run_dir: Path) -> list[Sample]:
    path = run_dir / SAMPLES
    if not path.exists():
        raise RunDirError(f"{run_dir} is not a run directory (no {SAMPLES})")
    samples = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                samples.append(Sample.model_validate_json(line))
            except ValueError as exc:
                raise RunDirError(f"{path}: line {number} is not a sample record ({exc})") from None
    return samples


def prepare_run(config: EvalConfig) -> PreparedRun:
    """Load and validate the dataset, then create or check the run directory."""
    lanes = plan_lanes(config)
    if config.agent_fn:
        load_agent_fn(config.agent_fn)  # a wrong module:function fails before the run directory exists
    else:
        checked_agent_settings(config)
    dataset = load_dataset(config.dataset, config.format, config.images, seed=config.seed, split=config.split)
    if dataset.problems and not config.skip_invalid:
        raise bad_rows_error(dataset, config.dataset, "pass --skip-invalid to evaluate the valid rows only")
    samples = dataset.samples[: config.limit] if config.limit is not None else dataset.samples
    if not samples:
        raise DatasetError(f"{config.dataset}: no valid samples")
    preflight(config, dataset, samples)
    config = with_style(config, samples)
    run_dir = Path(config.out).expanduser()
    positions: array[int] | None = None
    if config.shard_spec is not None:
        index, count = config.shard_spec
        positions = array(
            "q", (i for i, sample_id in enumerate(ids_of(samples)) if shard_of(sample_id, count) == index)
        )
        n_selected = len(samples)
        samples = (
            samples.select(positions) if isinstance(samples, SampleSpool) else [samples[i] for i in positions]
        )
        run_dir = shard_dir(run_dir, index, count)
    hashes = image_hashes(config, dataset, samples, run_dir)
    info = {
        "source": dataset.source,
        "format": dataset.format,
        "fingerprint": dataset.fingerprint,
        "n_samples": len(dataset.samples),
        "n_selected": len(samples),
        "n_invalid_rows": len(dataset.problems),
        "invalid_rows": [str(p) for p in dataset.problems[:100]],
        "image_sha256": hashes,
        # what the agent was kept from (see allow_metadata)
        "image_metadata": StreamedDict(lambda: image_metadata_entries(samples)),
        "pixels_only": not config.allow_metadata,
        "leak_guard": config.leak_guard,
        "source_hosts": source_hosts(config, dataset),
    }
    if positions is not None:
        info["shard"] = {"index": index, "count": count, "n_selected": n_selected}
    created = not (run_dir / MANIFEST).exists()
    if created and run_dir.is_dir() and any(run_dir.iterdir()):
        raise RunDirError(
            f"{run_dir} exists and is not a geosleuth run (no {MANIFEST}): its files would be overwritten; "
            "use a new or empty --out directory"
        )
    write_manifest(run_dir, build_manifest(config, info, lanes.endpoints))
    write_samples(run_dir, samples)
    if positions is not None:  # where this shard's samples stand in the whole run, for the merge
        write_atomic(run_dir / SHARD_POSITIONS, json.dumps(positions.tolist()) + "\n")
    guards = leak_guards(config, dataset)
    return PreparedRun(config, run_dir, dataset, samples, lanes, guards, created)


def ids_of(samples: Sequence[Sample]) -> Iterator[str]:
    """The samples' ids in order (a spool reads them without validating whole records)."""
    return samples.ids() if isinstance(samples, SampleSpool) else (s.id for s in samples)


def source_hosts(config: EvalConfig, dataset: Dataset) -> list[str]:
    """The hosts whose results the leak guard drops: the format's sources and the user's."""
    return sorted({*SOURCE_HOSTS.get(dataset.format, ()), *config.leak_hosts})


@dataclass(frozen=True)
class SampleGuards:
    """How a run screens each sample's search and POI results: a sample's `GuardSpec` is built
    when it runs, not held for every sample."""

    mode: GuardMode
    hosts: tuple[str, ...]

    def __call__(self, sample: Sample) -> GuardSpec:
        return sample_guard(self.mode, self.hosts, sample)

    def table(self, samples: Iterable[Sample]) -> Guards:
        """Sample id -> screen, for executors that receive tasks without their truth (Ray)."""
        return {s.id: self(s) for s in samples}


def leak_guards(config: EvalConfig, dataset: Dataset) -> SampleGuards | None:
    """The run's screens (None with ``leak_guard: off``); only a strict one holds the truth."""
    if config.leak_guard == "off":
        return None
    return SampleGuards(config.leak_guard, tuple(source_hosts(config, dataset)))


def sample_guard(mode: GuardMode, hosts: Sequence[str], sample: Sample) -> GuardSpec:
    """One sample's screen: the hosts, its id and file name, and (strict only) its truth."""
    strict = mode == "strict" and sample.lat is not None and sample.lon is not None
    truth = (sample.lat, sample.lon) if strict else None
    return GuardSpec(mode, tuple(hosts), sample_needles(sample.id, sample.image), truth)  # type: ignore[arg-type]


def image_hashes(
    config: EvalConfig, dataset: Dataset, samples: Sequence[Sample], run_dir: Path
) -> dict[str, str] | StreamedDict:
    """The selected samples' image hashes for ``run.json``, checked against ``--manifest`` and,
    on resume, against the run's first start; a new run's are hashed as ``run.json`` is written."""
    if not config.manifest and not (run_dir / MANIFEST).is_file():
        return StreamedDict(lambda: image_sha256_entries(samples))
    hashes = image_sha256(dataset.samples if config.manifest else samples)
    if config.manifest:
        try:
            check_frozen(read_frozen(Path(config.manifest).expanduser()), dataset.samples, hashes)
        except FrozenMismatch as exc:
            raise DatasetError(str(exc)) from None
        hashes = {i: hashes[i] for i in ids_of(samples) if i in hashes}  # the selected samples'
    check_same_images_as_before(run_dir, hashes)
    return hashes


def check_same_images_as_before(run_dir: Path, hashes: dict[str, str]) -> None:
    """A resumed run must see the image files it started with (same sizes can hide new pixels)."""
    path = run_dir / MANIFEST
    if not path.is_file():
        return
    try:
        before = run_image_hashes(json.loads(path.read_text(encoding="utf-8")))
    except ValueError:
        return  # an unreadable manifest is reported by write_manifest
    differ = image_conflicts(before, hashes)
    if differ:
        shown = ", ".join(differ[:10]) + (f" … and {len(differ) - 10} more" if len(differ) > 10 else "")
        raise RunDirError(
            f"{run_dir} was started on other image files for {len(differ)} sample(s): {shown}; "
            "use a new --out directory"
        )


def discard_unstarted(prepared: PreparedRun) -> None:
    """Remove what `prepare_run` wrote when the run it made failed before recording a sample, so
    the folder is not left a run that `merge` or a resume would take for one."""
    log = prepared.run_dir / TRAJECTORIES
    if not prepared.created or (log.exists() and log.stat().st_size > 0):
        return
    for name in (MANIFEST, SAMPLES, SHARD_POSITIONS, TRAJECTORIES, LOCK_FILE):
        (prepared.run_dir / name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # only when nothing else is in it
        prepared.run_dir.rmdir()


def bad_rows_error(dataset: Dataset, source: str | Path, remedy: str, shown: int = 20) -> DatasetError:
    """The error for a dataset with bad rows: the first ``shown`` named, then a count."""
    listed = "\n  ".join(str(p) for p in dataset.problems[:shown])
    more = f"\n  … and {len(dataset.problems) - shown} more" if len(dataset.problems) > shown else ""
    return DatasetError(
        f"{len(dataset.problems)} bad row(s) in {source}:\n  {listed}{more}\nfix them or {remedy}"
    )


def preflight(config: EvalConfig, dataset: Dataset, samples: Sequence[Sample]) -> None:
    """Refuse, before the first request, a run that could only fail on every sample.

    Every image missing means a wrong image folder, not a benchmark of failures. An explicit
    ``--format`` that reads less ground truth than the layout its columns show (coordinates or
    place labels left in ``metadata``) would score the run against nothing.
    """
    check_images(dataset, samples)
    if config.format in (None, "auto") or dataset.format == "hf":
        return
    try:
        detected = detect_format(Path(config.dataset).expanduser())
        if detected == dataset.format:
            return
        other = load_dataset(config.dataset, detected, config.images, seed=config.seed, split=config.split)
    except (DatasetError, OSError, ValueError):  # no second opinion: the explicit format stands
        return
    if _ground_truth(other.samples) > _ground_truth(dataset.samples):
        raise DatasetError(
            f"--format {dataset.format} reads less ground truth from {config.dataset} than its columns "
            f"hold (they look like --format {detected}: {_ground_truth(other.samples)} coordinate pairs "
            f"and labels against {_ground_truth(dataset.samples)}); drop --format to auto-detect"
        )


def with_style(config: EvalConfig, samples: Sequence[Sample]) -> EvalConfig:
    """The config with the prompt style the run's protocol can read: the protocol's own style
    when none is given (``--protocol twm``: Thinking with Map); a style it cannot read stops here."""
    if config.agent_fn or not config.model:  # the offline pipeline and a custom agent have no style
        return config
    given = config.prompt or config.agent.get("prompt_style")
    style = choose_style(given, protocol_for(config.protocol, samples).name, tools=True)
    return config if given else config.model_copy(update={"prompt": style})


def check_images(dataset: Dataset, samples: Sequence[Sample], option: str = "--images FOLDER") -> None:
    """Refuse a run none of whose images exists: a wrong image folder, not a benchmark of failures
    (``option`` is how the caller's user points at the folder). Some missing: those samples fail."""
    if len(dataset.missing_images) < len(samples):  # some image exists: no id set needed
        return
    selected = {s.id for s in samples}
    missing = [m for m in dataset.missing_images if m.sample_id in selected]
    if missing and len(missing) == len(selected):
        shown = "\n  ".join(str(m) for m in missing[:5])
        raise DatasetError(
            f"none of the {len(selected)} image(s) of {dataset.source} exists:\n  {shown}\n"
            f"point {option} at the image folder (`geosleuth datasets validate` lists every row)"
        )


def _ground_truth(samples: Sequence[Sample]) -> int:
    """Coordinate pairs plus place labels: how much a scorer can compare answers against."""
    return sum((s.lat is not None) + len(s.labels) + (s.answer is not None) for s in samples)


async def execute(
    prepared: PreparedRun, *, retry_failed: bool = False, on_result: ProgressFn | None = None
) -> RunStats:
    """Run the pending samples on the configured backend, holding the run directory's lock; a
    run this invocation made that fails before its first sample leaves no run behind."""
    with run_lock(prepared.run_dir):  # another process's run is never discarded: it holds the lock
        try:
            return await _execute(prepared, retry_failed, on_result)
        except BaseException:
            discard_unstarted(prepared)
            raise


async def _execute(prepared: PreparedRun, retry_failed: bool, on_result: ProgressFn | None) -> RunStats:
    config = prepared.config
    lanes = prepared.lanes
    run_fns = [build_run_fn(config, prepared.run_dir, url) for url in lanes.endpoints]
    if config.backend == "ray":
        from geosleuth.eval.run.ray_backend import RayBackend

        backend = RayBackend(
            config.ray_address,
            config.ray_batch_size,
            resources=config.ray_resources,
            restart_wait_s=config.ray_restart_wait_s,
        )
        return await backend.run(
            prepared.samples,
            prepared.run_dir,
            run_fns,
            concurrency=config.concurrency,
            timeout_s=config.timeout_s,
            retry_failed=retry_failed,
            on_result=on_result,
            guards=prepared.guards.table(prepared.samples) if prepared.guards else None,
        )
    run_fn = run_fns[0] if len(run_fns) == 1 else LaneRouter(lanes, run_fns, config.concurrency)
    return await run_samples(
        prepared.samples,
        run_fn,
        prepared.run_dir,
        concurrency=config.concurrency * len(run_fns),
        timeout_s=config.timeout_s,
        retry_failed=retry_failed,
        on_result=on_result,
        guards=prepared.guards,
    )
