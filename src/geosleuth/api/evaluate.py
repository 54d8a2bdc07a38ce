"""``geosleuth.evaluate``: the resumable benchmark run of `geosleuth eval`, as one call."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.eval.judges.tasks import judge_outcome, run_judges
from geosleuth.eval.report.write import write_report
from geosleuth.eval.run.config import config_flags, read_config_file, resolve_config
from geosleuth.eval.run.pipeline import execute, prepare_run, read_samples
from geosleuth.eval.run.runner import RunStats
from geosleuth.eval.run.store import load_run_trajectories

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Evaluation:
    """A finished run: ``metrics`` by name (``acc@25km`` in percent, ``median_km``, …), the whole
    ``summary.json`` (intervals, breakdowns, tool use), what this call ran, and where it lies."""

    run_dir: Path
    metrics: dict[str, Any]
    summary: dict[str, Any] = field(repr=False)
    stats: RunStats


def evaluate(
    dataset: str | Path | None = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    out: str | Path,
    retry_failed: bool = False,
    config: str | Path | None = None,
    **options: Any,
) -> Evaluation:
    """Run the agent (offline when ``model`` is None) over a benchmark into ``out``, then report.

    ``options`` are `geosleuth eval`'s, by the same names (``prompt``, ``tools``, ``samples``,
    ``concurrency``, ``limit``, ``timeout``, ``format``, ``protocol``, ``judge_model``, …);
    ``config`` is a YAML or TOML file of them. Calling again with the same ``out`` resumes:
    finished samples are read back, not run again. Bad settings or data raise before the first
    request (`ValueError`, `geosleuth.eval.datasets.loading.DatasetError`,
    `geosleuth.eval.run.config.ConfigError`).
    """
    dataset = None if dataset is None else str(dataset)
    flags = config_flags(
        {**options, "dataset": dataset, "out": str(out), "model": model, "base_url": base_url}
    )
    file_values = read_config_file(Path(config)) if config is not None else {}
    prepared = prepare_run(resolve_config(file_values, flags))
    stats = asyncio.run(execute(prepared, retry_failed=retry_failed))
    run_dir = prepared.run_dir
    if prepared.config.judge is not None:
        settings = prepared.config.judge
        samples = read_samples(run_dir)
        asyncio.run(run_judges(run_dir, samples, load_run_trajectories(run_dir), settings))
        outcome, complete = judge_outcome(run_dir, samples, settings.tasks)
        if not complete:
            log.warning("%s", outcome)
    summary = write_report(run_dir) if prepared.config.report else {}
    metrics = {
        name: metric.get("value") if isinstance(metric, Mapping) else metric
        for name, metric in summary.get("metrics", {}).items()
    }
    return Evaluation(run_dir, metrics, summary, stats)
