"""A run directory read for reports, comparisons and pages: manifest, samples and trajectories,
streamed, so that reporting a run holds columns, never every record.

Its own module so that ``report`` and ``html`` both import it and not each other.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from pydantic import ValidationError

from geosleuth.core.records import Sample, Trajectory, trajectory_from_json
from geosleuth.eval.report.scores import RecordStats
from geosleuth.eval.run.config import SAMPLES, read_manifest
from geosleuth.eval.run.store import RunDirError, TrajectoryStore


def iter_samples(run_dir: Path) -> Iterator[Sample]:
    """The run's samples in dataset order, one at a time."""
    path = run_dir / SAMPLES
    if not path.exists():
        raise RunDirError(f"{run_dir} is not a run directory (no {SAMPLES})")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield Sample.model_validate_json(line)
            except ValueError as exc:
                raise RunDirError(f"{path}: line {number} is not a sample record ({exc})") from None


class TrajectoryIndex:
    """Where each sample's trajectory records start in ``trajectories.jsonl``: 64-bit id hashes
    and byte offsets in two sorted arrays (16 bytes a record), read back one at a time.

    Records whose hashes are equal (a sample's retries, or two ids that collide) keep file order;
    which of them is a sample's latest is decided by reading their ids back, so a collision never
    hides a sample.
    """

    def __init__(self, run_dir: Path) -> None:
        self.store = TrajectoryStore(run_dir)
        keys, starts = array("q"), array("q")  # 8 bytes an entry while the log streams by
        for start, line in self.store.located_lines():
            keys.append(hash(_sample_id(line)))
            starts.append(start)
        key_array = np.frombuffer(keys, dtype=np.int64)
        order = np.argsort(key_array, kind="stable")  # equal hashes keep file order
        self.keys = key_array[order]
        self.starts = np.frombuffer(starts, dtype=np.int64)[order]

    def __len__(self) -> int:
        """The number of samples with a record."""
        if not self.keys.size:
            return 0
        bounds = np.flatnonzero(np.diff(self.keys)) + 1
        runs = np.split(np.arange(self.keys.size), bounds)
        return sum(1 if run.size == 1 else len({self._id_at(int(i)) for i in run}) for run in runs)

    def latest(self) -> Iterator[Trajectory]:
        """Each sample's latest record, in file order, streaming (superseded records are skipped)."""
        for start, line in self.store.located_lines():
            sample_id = _sample_id(line)
            if self._latest_start(sample_id) == start:
                yield self._parsed(line, sample_id)

    def get(self, sample_id: str) -> Trajectory | None:
        """The sample's latest record, or None when it has none."""
        start = self._latest_start(sample_id)
        if start is None:
            return None
        record = self._parsed(self._line_at(start), sample_id)
        return record if record.sample_id == sample_id else None

    def _latest_start(self, sample_id: str) -> int | None:
        """Where the sample's last record starts. A hash with one entry is taken unread (`get`
        checks the id it parses); among equal hashes, the last entry whose id is the sample's."""
        key = hash(sample_id)
        low = int(np.searchsorted(self.keys, key, side="left"))
        high = int(np.searchsorted(self.keys, key, side="right"))
        if high - low == 1:
            return int(self.starts[low])
        return next(
            (int(self.starts[at]) for at in range(high - 1, low - 1, -1) if self._id_at(at) == sample_id),
            None,
        )

    def _id_at(self, at: int) -> str:
        return _sample_id(self._line_at(int(self.starts[at])))

    def _line_at(self, start: int) -> bytes:
        with self.store.path.open("rb") as handle:
            handle.seek(start)
            return handle.readline()

    def _parsed(self, line: bytes, sample_id: str) -> Trajectory:
        try:
            return trajectory_from_json(line)
        except (ValidationError, ValueError) as exc:
            raise RunDirError(
                f"{self.store.path}: a record of {sample_id!r} is not a trajectory: {exc}"
            ) from exc


def _sample_id(line: bytes) -> str:
    return str(orjson.loads(line)["sample_id"])


@dataclass
class RunData:
    """A run directory: its manifest at once; samples and trajectories streamed when read.

    ``samples`` and ``records`` load every sample / every record's `RecordStats` (no texts),
    for callers that want them all; reports stream through `iter_samples` and `trajectories`.
    """

    run_dir: Path
    manifest: dict[str, Any]
    preloaded: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config", {}))

    def iter_samples(self) -> Iterator[Sample]:
        if "samples" in self.preloaded:
            return iter(self.preloaded["samples"])
        return iter_samples(self.run_dir)

    @cached_property
    def samples(self) -> list[Sample]:
        return list(self.iter_samples())

    def samples_by_id(self, ids: Collection[str]) -> dict[str, Sample]:
        """The samples with these ids (streaming past the others)."""
        return {s.id: s for s in self.iter_samples() if s.id in ids}

    @cached_property
    def records(self) -> dict[str, RecordStats]:
        if "records" in self.preloaded:
            return {k: RecordStats.of(v) for k, v in self.preloaded["records"].items()}
        return load_records(self.run_dir)

    @cached_property
    def trajectories(self) -> TrajectoryIndex:
        return TrajectoryIndex(self.run_dir)

    def lookup(self, sample_id: str) -> Trajectory | RecordStats | None:
        """A sample's trajectory: the given records when the run was built with them, else read back."""
        if "records" in self.preloaded:
            return self.preloaded["records"].get(sample_id)  # type: ignore[no-any-return]
        return self.trajectories.get(sample_id)


def load_run(run_dir: Path) -> RunData:
    return RunData(run_dir, read_manifest(run_dir))


def load_records(run_dir: Path) -> dict[str, RecordStats]:
    """`RecordStats` of every finished trajectory by sample id, streaming the log."""
    return {t.sample_id: RecordStats.of(t) for t in TrajectoryStore(run_dir).records()}
