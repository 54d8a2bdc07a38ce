"""A run directory read for reports, comparisons and pages: manifest, samples and trajectories,
streamed, so that reporting a run holds columns, never every record.

Its own module so that ``report`` and ``html`` both import it and not each other.
"""

from __future__ import annotations

import weakref
from array import array
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import msgspec
import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from geosleuth.core.records import Sample, Trajectory, trajectory_from_json
from geosleuth.eval.report.scores import RecordStats
from geosleuth.eval.run.config import MANIFEST, SAMPLES, read_manifest
from geosleuth.eval.run.store import RunDirError, TrajectoryStore
from geosleuth.scoring.hashindex import HashIndex

LATEST_BLOCK = 65_536
"""Record offsets turned into Python ints at a time while the latest records stream by."""


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
    and byte offsets in a `HashIndex` (16 bytes a record), read back one at a time.

    Records whose hashes are equal (a sample's retries, or two ids that collide) keep file order;
    which of them is a sample's latest is decided by reading their ids back, so a collision never
    hides a sample. The log is read through once to build the index (only each line's id is
    decoded); records are then read at their offsets through one open handle.
    """

    def __init__(self, run_dir: Path) -> None:
        self.store = TrajectoryStore(run_dir)
        keys, starts = array("q"), array("q")  # 8 bytes an entry while the log streams by
        for start, line in self.store.located_lines():
            keys.append(hash(self._id_of(line)))
            starts.append(start)
        self.index = HashIndex(np.frombuffer(keys, dtype=np.int64), np.frombuffer(starts, dtype=np.int64))
        self._handle: BinaryIO | None = None

    def __len__(self) -> int:
        """The number of samples with a record."""
        return int(self._latest_starts().size)

    def latest(self) -> Iterator[Trajectory]:
        """Each sample's latest record, in file order, streaming (superseded records are skipped)."""
        starts = self._latest_starts()
        for block in range(0, starts.size, LATEST_BLOCK):  # Python ints a block at a time, not a list of all
            for start in starts[block : block + LATEST_BLOCK].tolist():
                yield self._parsed(self._line_at(start))

    def _latest_starts(self) -> NDArray[np.int64]:
        """Where each sample's latest record starts, ascending: among records that share a hash,
        the last one of each id read back."""
        starts = self.index.payloads
        superseded: list[int] = []
        for shared in self.index.shared():
            last: dict[str, int] = {}
            for start in shared.tolist():
                sample_id = self._id_at(start)
                if sample_id in last:
                    superseded.append(last[sample_id])
                last[sample_id] = start
        if superseded:
            starts = starts[~np.isin(starts, np.array(superseded, dtype=np.int64))]
        return np.sort(starts)

    def get(self, sample_id: str) -> Trajectory | None:
        """The sample's latest record, or None when it has none."""
        start = self._latest_start(sample_id)
        if start is None:
            return None
        record = self._parsed(self._line_at(start))
        return record if record.sample_id == sample_id else None

    def _latest_start(self, sample_id: str) -> int | None:
        """Where the sample's last record starts. A hash with one entry is taken unread (`get`
        checks the id it parses); among equal hashes, the last entry whose id is the sample's."""
        entries = self.index.entries(hash(sample_id)).tolist()
        if len(entries) == 1:
            return int(entries[0])
        return next((start for start in reversed(entries) if self._id_at(start) == sample_id), None)

    def _id_at(self, start: int) -> str:
        return self._id_of(self._line_at(start))

    def _line_at(self, start: int) -> bytes:
        if self._handle is None:
            self._handle = handle = self.store.path.open("rb")
            weakref.finalize(self, handle.close)
        self._handle.seek(start)
        return self._handle.readline()

    def _id_of(self, line: bytes) -> str:
        try:
            return _sample_id(line)
        except (msgspec.DecodeError, TypeError) as exc:
            raise RunDirError(f"{self.store.path}: a record has no sample id: {exc}") from exc

    def _parsed(self, line: bytes) -> Trajectory:
        try:
            return trajectory_from_json(line)
        except (ValidationError, ValueError) as exc:
            raise RunDirError(
                f"{self.store.path}: a record of {self._id_of(line)!r} is not a trajectory: {exc}"
            ) from exc


class _Identified(msgspec.Struct):
    """The one field of a trajectory line an index reads (the rest is skipped, not built)."""

    sample_id: Any


_ID_DECODER = msgspec.json.Decoder(_Identified)


def _sample_id(line: bytes) -> str:
    sample_id = _ID_DECODER.decode(line).sample_id
    if isinstance(sample_id, dict | list) or sample_id is None:
        raise TypeError(f"sample_id is {sample_id!r}")
    return str(sample_id)


@dataclass
class RunData:
    """A run directory: its manifest at once; samples and trajectories streamed when read.

    ``samples`` and ``records`` load every sample / every record's `RecordStats` (no texts),
    for callers that want them all; reports stream through `iter_samples` and `trajectories`.
    """

    run_dir: Path
    manifest: dict[str, Any]
    preloaded: dict[str, Any] = field(default_factory=dict, repr=False)

    def full_manifest(self) -> dict[str, Any]:
        """run.json with its per-sample image hashes (which `load_run` leaves unread), for the
        commands that pair runs image by image."""
        if (self.run_dir / MANIFEST).exists():
            return read_manifest(self.run_dir)
        return self.manifest

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
    """A run directory, its manifest read without the per-sample image hashes (see `full_manifest`)."""
    return RunData(run_dir, read_manifest(run_dir, image_hashes=False))


def load_records(run_dir: Path) -> dict[str, RecordStats]:
    """`RecordStats` of every finished trajectory by sample id, streaming the log."""
    return {t.sample_id: RecordStats.of(t) for t in TrajectoryStore(run_dir).records()}
