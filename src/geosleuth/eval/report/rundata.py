"""A run directory loaded once (manifest, samples, trajectory stats) for reports, comparisons and pages.

Its own module so that ``report`` and ``html`` both import it and not each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosleuth.core.records import Sample
from geosleuth.eval.report.scores import RecordStats
from geosleuth.eval.run.config import read_manifest
from geosleuth.eval.run.pipeline import read_samples
from geosleuth.eval.run.store import TrajectoryStore


@dataclass
class RunData:
    """Everything stored in a run directory, loaded once for reports and comparisons.

    Trajectories are kept as `RecordStats` (no texts), so a report over a 100k-sample run
    fits in memory; pages that show a trajectory read it with `load_run_trajectories`.
    """

    run_dir: Path
    manifest: dict[str, Any]
    samples: list[Sample]
    records: dict[str, RecordStats]

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config", {}))


def load_run(run_dir: Path) -> RunData:
    manifest = read_manifest(run_dir)
    return RunData(run_dir, manifest, read_samples(run_dir), load_records(run_dir))


def load_records(run_dir: Path) -> dict[str, RecordStats]:
    """`RecordStats` of every finished trajectory by sample id, streaming the log."""
    return {t.sample_id: RecordStats.of(t) for t in TrajectoryStore(run_dir).records()}
