"""A truth file's ground truth by sample id, held on disk: joining predictions to 3M truth rows
costs tens of bytes a row in memory, not a Python object per row.

Each truth row is pickled once into a spool file in a temp folder this index creates (and removes
on `close`, or when the index is collected); memory keeps a `HashIndex`: the 64-bit hash of each
row's `sample_key` and the row's place in the spool. A lookup is a binary search, then the row is
read back and its key compared, so two ids whose hashes collide still join right. Rows read
by another reader (a dataset folder) are spooled the same way.
"""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from geosleuth.core.ids import sample_key
from geosleuth.scoring.columns import PLACES365_2018_HEADER
from geosleuth.scoring.columnstore import Growing
from geosleuth.scoring.hashindex import HashIndex
from geosleuth.scoring.io import Truth, iter_rows, row_id, truth_from_row
from geosleuth.scoring.rows import InputRow, ScoreInputError

Record = tuple[str, int, int, Any]
"""(sample key, line, row number in the truth stream, the Truth's fields) as spooled."""


def _remove(handles: list[Any], folder: Path) -> None:
    for handle in handles:
        if isinstance(handle, int):
            os.close(handle)
        else:
            handle.close()
    shutil.rmtree(folder, ignore_errors=True)


class TruthIndex(Mapping[str, Truth]):
    """Ground truth by `sample_key`, in truth-file order, the first row of a repeated id kept.

    Built by `append` (one row at a time) and `freeze`; then a read-only mapping whose ``items()``
    stream the spool in file order (samples without a prediction are listed from there).
    """

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="geosleuth-truth-"))
        self.path = self.folder / "truth.pickle"
        self._writer: BinaryIO = self.path.open("wb")
        self._handles: list[Any] = [self._writer]
        self._closer = weakref.finalize(self, _remove, self._handles, self.folder)
        self._hashes = Growing(np.int64)
        self._starts = Growing(np.int64)
        self._end = 0
        self._fd = -1
        self.index = HashIndex([], [])
        self.offsets = np.zeros(1, dtype=np.int64)
        self.dropped = np.zeros(0, dtype=bool)
        self.first_key: str | None = None

    def append(self, key: str, line: int, number: int, truth: Truth) -> None:
        """Spool one truth row (its key is ``sample_key`` of its id)."""
        fields = (truth.lat, truth.lon, truth.labels, truth.fields, truth.problem, truth.answer, truth.id)
        data = pickle.dumps((key, line, number, fields), protocol=pickle.HIGHEST_PROTOCOL)
        self._writer.write(data)
        self._hashes.append(hash(key))
        self._starts.append(self._end)
        self._end += len(data)
        if self.first_key is None:
            self.first_key = key

    def freeze(self) -> list[Record]:
        """Sort the hashes for lookups; returns the records of repeated ids (dropped: first one kept)."""
        self._writer.close()
        self._fd = os.open(self.path, os.O_RDONLY)
        self._handles.append(self._fd)
        hashes = self._hashes.array()
        self.offsets = np.append(self._starts.array(), self._end)
        self._hashes = self._starts = Growing(np.int64)
        index = HashIndex(hashes, np.arange(hashes.size))  # equal hashes keep file order: the first wins
        self.dropped = np.zeros(hashes.size, dtype=bool)
        repeats: list[Record] = []
        for places in index.shared():  # ids whose hashes are equal: the same id, or a collision
            seen: set[str] = set()
            for place in places.tolist():
                record = self._record(place)
                if record[0] in seen:
                    self.dropped[place] = True
                    repeats.append(record)
                seen.add(record[0])
        self.index = index.without(self.dropped)
        repeats.sort(key=lambda r: r[2])
        return repeats

    def close(self) -> None:
        """Remove the spool and its folder."""
        self._closer()

    def __enter__(self) -> TruthIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _record(self, place: int) -> Record:
        start, stop = int(self.offsets[place]), int(self.offsets[place + 1])
        record: Record = pickle.loads(os.pread(self._fd, stop - start, start))  # noqa: S301 - our own spool
        return record

    def __getitem__(self, key: str) -> Truth:
        if not isinstance(key, str):
            raise KeyError(key)
        for place in self.index.entries(hash(key)).tolist():
            record = self._record(place)
            if record[0] == key:
                return Truth(*record[3])
        raise KeyError(key)

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self.items())

    def items(self) -> Iterator[tuple[str, Truth]]:  # type: ignore[override]
        """Every kept row in file order, read from the spool as it streams by."""
        with self.path.open("rb") as handle:
            for place in range(self.dropped.size):
                key, _, _, fields = pickle.load(handle)  # noqa: S301 - our own spool
                if not self.dropped[place]:
                    yield key, Truth(*fields)


def truth_index(
    path: Path,
    keep_fields: bool = True,
    notes: list[str] | None = None,
    rows: Iterable[InputRow] | None = None,
) -> tuple[TruthIndex, list[str]]:
    """A dataset file's ground truth by `sample_key` (on disk, `TruthIndex`: the caller closes
    it), plus problems found while reading it, in file order.

    ``rows``: the dataset's rows when another reader read them (a dataset folder in a layout
    `eval` reads), named ``path`` in messages.

    The file is streamed; ``keep_fields=False`` keeps only coordinates, labels and answers per
    sample (the dataset's other columns are needed only to group rows with ``--by``). The
    released IM2GPS / YFCC truth files (``IMG_ID, AUTHOR, LAT, LON, …``) are read as they are,
    GeoEstimation's 2018 header with its swapped LON / LAT names included (``notes`` says so).
    """
    index = TruthIndex()
    try:
        problems = _spool(index, path, keep_fields, notes, rows)
    except BaseException:
        index.close()
        raise
    return index, problems


def _spool(
    index: TruthIndex,
    path: Path,
    keep_fields: bool,
    notes: list[str] | None,
    rows: Iterable[InputRow] | None,
) -> list[str]:
    problems: list[tuple[int, str]] = []
    empty = True
    swapped: bool | None = None
    for number, row in enumerate(iter_rows(path, notes) if rows is None else rows):
        empty = False
        if row.data is None:
            problems.append((number, row.error or f"{path}:{row.line}: unreadable"))
            continue
        if swapped is None:
            swapped = tuple(row.data)[: len(PLACES365_2018_HEADER)] == PLACES365_2018_HEADER
            if swapped and notes is not None:
                notes.append(
                    f"{path}: GeoEstimation's 2018 header names the columns LON, LAT where the values are "
                    "latitude, longitude; read by position"
                )
        data = {**row.data, "LAT": row.data["LON"], "LON": row.data["LAT"]} if swapped else row.data
        sid = row_id(data)
        if sid is None:
            problems.append((number, f"{path}:{row.line}: ground-truth row has no id"))
            continue
        truth = truth_from_row(data, plain_coords=True)
        if truth is None:
            truth = Truth(problem="ground-truth row has no coordinates")
        if truth.problem:
            truth.problem = f"{path}:{row.line}: {truth.problem}"
        truth.fields = {**data, **truth.fields} if keep_fields else {}
        truth.id = sid
        index.append(sample_key(sid), row.line, number, truth)
    if empty:
        raise ScoreInputError(f"{path}: ground-truth file is empty")
    for _, line, number, fields in index.freeze():
        problems.append((number, f"{path}:{line}: duplicate id {fields[-1]!r} (first one kept)"))
    if not len(index):
        problems.sort(key=lambda p: p[0])
        raise ScoreInputError(
            f"{path}: no usable ground-truth rows ({problems[0][1] if problems else 'no ids'})"
        )
    problems.sort(key=lambda p: p[0])
    return [message for _, message in problems]
