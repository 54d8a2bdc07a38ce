"""The durable trajectory log of a run directory.

One JSON line per finished sample, appended, flushed and fsynced before the sample counts as
done. A process killed at any moment leaves at most one torn last line, which is cut off on
the next open; nothing else is ever rewritten except by ``retry-failed`` (atomic replace).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray
from pydantic import ValidationError

from geosleuth.core.records import Trajectory, TrajectoryStatus, trajectory_from_json
from geosleuth.secrets import redact_text

TRAJECTORIES = "trajectories.jsonl"
FAILED_ATTEMPTS = "failed_attempts.jsonl"


class RunDirError(Exception):
    """The run directory is unusable (corrupt log, dataset changed, …)."""


def fsync_dir(path: Path) -> None:
    """Make a rename or a new file in ``path`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file so that readers see either the old or the new content."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_atomic_lines(path: Path, lines: Iterable[bytes]) -> None:
    """`write_atomic` of a file written line by line (never held whole in memory)."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("wb") as handle:
        handle.writelines(lines)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class TrajectoryStore:
    """Append-only JSONL of records keyed by ``sample_id`` (trajectories by default), with
    torn-tail repair; other logs of the same shape (synthesis rejections) name their file."""

    def __init__(self, run_dir: Path, filename: str = TRAJECTORIES) -> None:
        self.run_dir = run_dir
        self.path = run_dir / filename
        self._handle: IO[bytes] | None = None

    def _lines(self) -> Iterator[tuple[int, bytes, int]]:
        """Intact record lines with their number and the byte offset just after them.

        Streams the file, so resuming a 100k-sample run never holds every record at once. An
        unterminated or unparseable final line is a torn write and ends the stream; an
        unparseable line anywhere else is an error.
        """
        if not self.path.exists():
            return
        offset = 0
        pending: tuple[int, bytes] | None = None
        with self.path.open("rb") as handle:
            for number, line in enumerate(handle, start=1):
                if pending is not None:
                    raise RunDirError(f"{self.path}: line {pending[0]} is not a trajectory record")
                if not line.endswith(b"\n"):
                    return  # no newline at the end: a write was interrupted
                offset += len(line)
                if not line.strip():
                    continue
                if _is_torn(line):
                    pending = (number, line)
                    continue
                yield number, line, offset

    def located_lines(self) -> Iterator[tuple[int, bytes]]:
        """(byte offset, line) of each intact record line, for readers that come back to one record."""
        for _, line, end in self._lines():
            yield end - len(line), line

    def lines_with_ids(self) -> Iterator[tuple[bytes, str]]:
        """The raw record lines a reader would load (a torn tail left out) with their sample ids."""
        for _, line, record in self._records():
            yield line, str(record["sample_id"])

    def _records(self) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
        for number, line, _ in self._lines():
            record = json.loads(line)
            if not isinstance(record, dict) or "sample_id" not in record:
                raise RunDirError(f"{self.path}: line {number} is not a trajectory record")
            yield number, line, record

    def statuses(self) -> dict[str, str]:
        """Sample id -> status of every finished record (cheap: no full validation)."""
        return {
            str(r["sample_id"]): str(r.get("status", TrajectoryStatus.OK.value))
            for _, _, r in self._records()
        }

    def finished_keys(self) -> NDArray[np.bytes_]:
        """Sorted 128-bit digests of the finished samples' ids: what a resume skips, in 16 bytes a
        sample rather than a set of ids (`is_finished` tests ids against it). 128 bits, not a
        64-bit hash: a resume cannot read ids back, and a collision would skip a sample unrun."""
        keys = bytearray()
        for _, _, record in self._records():
            keys += text_digest(str(record["sample_id"]))
        return np.unique(np.frombuffer(bytes(keys), dtype=DIGEST))

    def records(self, ids: Collection[str] | None = None) -> Iterator[Trajectory]:
        """Finished trajectories in file order, streaming; ``ids`` skips other samples unvalidated."""
        for number, line, _ in self._lines():
            if ids is not None and _sample_id(line) not in ids:
                continue
            try:
                yield trajectory_from_json(line)
            except (ValidationError, ValueError) as exc:
                raise RunDirError(f"{self.path}: line {number} is not a trajectory record: {exc}") from exc

    def load(self, ids: Collection[str] | None = None) -> dict[str, Trajectory]:
        """Finished trajectories by sample id (a later record for the same id wins)."""
        return {record.sample_id: record for record in self.records(ids)}

    def get(self, sample_id: str) -> Trajectory | None:
        """The latest record of one sample, streaming: only that record is validated and kept."""
        found: tuple[int, bytes] | None = None
        for number, line, record in self._records():
            if str(record["sample_id"]) == sample_id:
                found = (number, line)
        if found is None:
            return None
        try:
            return trajectory_from_json(found[1])
        except (ValidationError, ValueError) as exc:
            raise RunDirError(f"{self.path}: line {found[0]} is not a trajectory record: {exc}") from exc

    def _intact_length(self) -> int:
        length = 0
        for _, _, offset in self._lines():
            length = offset
        return length

    def repair(self) -> int:
        """Cut a torn tail left by a killed writer; returns the number of bytes removed."""
        if not self.path.exists():
            return 0
        good = self._intact_length()
        size = self.path.stat().st_size
        if good < size:
            with self.path.open("r+b") as handle:
                handle.truncate(good)
                handle.flush()
                os.fsync(handle.fileno())
        return size - good

    def open(self) -> None:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.repair()
        self._handle = self.path.open("ab")
        fsync_dir(self.run_dir)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def append(self, trajectories: Iterable[Trajectory]) -> None:
        """Write records and fsync: when this returns they survive a crash."""
        if self._handle is None:
            raise RunDirError("store is not open")
        payload = b"".join(redact_text(t.model_dump_json()).encode() + b"\n" for t in trajectories)
        self._handle.write(payload)
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def drop_failed(self) -> list[str]:
        """Move failed records to ``failed_attempts.jsonl`` (kept for the record) and out of the log."""
        failed_ids = [i for i, status in self.statuses().items() if status != TrajectoryStatus.OK.value]
        if not failed_ids:
            return []
        failed = set(failed_ids)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with (self.run_dir / FAILED_ATTEMPTS).open("ab") as moved, tmp.open("wb") as kept:
            for _, line, record in self._records():
                (moved if record["sample_id"] in failed else kept).write(line)
            for handle in (moved, kept):
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, self.path)
        fsync_dir(self.run_dir)
        return failed_ids


def _sample_id(line: bytes) -> str | None:
    record = json.loads(line)
    return str(record["sample_id"]) if isinstance(record, dict) and "sample_id" in record else None


def _is_torn(line: bytes) -> bool:
    """A line that is a truncated JSON object (possible only as the final record)."""
    try:
        json.loads(line)
    except ValueError:
        return True
    return False


def load_run_trajectories(run_dir: Path, ids: Collection[str] | None = None) -> dict[str, Trajectory]:
    """Finished trajectories of a run directory, by sample id (see `TrajectoryStore.load`)."""
    return TrajectoryStore(run_dir).load(ids)


DIGEST = np.dtype("S16")


def text_digest(sample_id: str) -> bytes:
    """A string's 128-bit BLAKE2b digest (sample ids, tool results: texts that differ collide with
    odds of 2^-128)."""
    return hashlib.blake2b(sample_id.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def is_finished(sample_ids: Sequence[str], finished: NDArray[np.bytes_]) -> NDArray[np.bool_]:
    """Which of ``sample_ids`` have a finished record (``finished``: `TrajectoryStore.finished_keys`)."""
    keys = np.frombuffer(b"".join(map(text_digest, sample_ids)), dtype=DIGEST)
    return np.isin(keys, finished)
