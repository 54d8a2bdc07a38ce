"""Samples kept on disk, not in memory: a benchmark of a million rows costs ~12 bytes a sample.

A `SampleSpool` holds each sample as one JSON line in an anonymous temporary file (gone when the
spool is) and only the lines' offsets and sizes in memory; reading a sample parses its line
again. Views (a slice, the samples of one shard, a split) share the file and hold their own
offsets, so selecting never copies a sample.
"""

from __future__ import annotations

import os
import tempfile
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, overload

import msgspec
import numpy as np
from numpy.typing import NDArray

from geosleuth.core.records import Sample


class _Identified(msgspec.Struct):
    """A sample line's id alone: msgspec skips the other fields without building them."""

    id: str


_ID_DECODER = msgspec.json.Decoder(_Identified)


class _SpoolFile:
    """The append-only file every view of one spool reads by offset (``os.pread``: no shared seek)."""

    def __init__(self) -> None:
        # closed (and so deleted) with the spool: it outlives any one block
        self.handle: IO[bytes] = tempfile.TemporaryFile(prefix="geosleuth-samples-")  # noqa: SIM115
        self.end = 0
        self.dirty = False

    def append(self, line: bytes) -> int:
        start = self.end
        self.handle.write(line)
        self.end += len(line)
        self.dirty = True
        return start

    def read(self, start: int, size: int) -> bytes:
        if self.dirty:
            self.handle.flush()
            self.dirty = False
        return os.pread(self.handle.fileno(), size, start)


class SampleSpool(Sequence[Sample]):
    """A sequence of samples backed by a spool file: indexing and iteration parse one line each."""

    def __init__(self, samples: Iterable[Sample] = ()) -> None:
        self._file = _SpoolFile()
        self._starts = array("q")
        self._sizes = array("q")
        self.extend(samples)

    @classmethod
    def _view(cls, file: _SpoolFile, starts: array[int], sizes: array[int]) -> SampleSpool:
        view = cls.__new__(cls)
        view._file, view._starts, view._sizes = file, starts, sizes
        return view

    def append(self, sample: Sample) -> None:
        line = sample.model_dump_json().encode() + b"\n"
        self._starts.append(self._file.append(line))
        self._sizes.append(len(line))

    def extend(self, samples: Iterable[Sample]) -> None:
        for sample in samples:
            self.append(sample)

    def __len__(self) -> int:
        return len(self._starts)

    @overload
    def __getitem__(self, index: int) -> Sample: ...
    @overload
    def __getitem__(self, index: slice) -> SampleSpool: ...
    def __getitem__(self, index: int | slice) -> Sample | SampleSpool:
        if isinstance(index, slice):
            return self._view(self._file, self._starts[index], self._sizes[index])
        return Sample.model_validate_json(self.line(index))

    def line(self, index: int) -> bytes:
        """Sample ``index`` as the JSON line `Sample.model_dump_json` wrote (newline included)."""
        return self._file.read(self._starts[index], self._sizes[index])

    def lines(self) -> Iterator[bytes]:
        for index in range(len(self)):
            yield self.line(index)

    def __iter__(self) -> Iterator[Sample]:
        for line in self.lines():
            yield Sample.model_validate_json(line)

    def ids(self) -> Iterator[str]:
        """Each sample's id, read from the head of its line without validating the rest."""
        for line in self.lines():
            try:
                yield _ID_DECODER.decode(line).id
            except (msgspec.DecodeError, msgspec.ValidationError):  # e.g. an escaped lone surrogate
                yield Sample.model_validate_json(line).id

    def select(self, positions: Iterable[int]) -> SampleSpool:
        """The samples at ``positions`` (in that order), sharing this spool's file."""
        chosen = list(positions) if not isinstance(positions, array) else positions
        return self._view(
            self._file,
            array("q", (self._starts[i] for i in chosen)),
            array("q", (self._sizes[i] for i in chosen)),
        )

    def where(self, keep: Callable[[Sample], bool]) -> SampleSpool:
        """The samples for which ``keep`` is true, in order."""
        return self.select(array("q", (i for i, sample in enumerate(self) if keep(sample))))

    def id_order(self) -> NDArray[np.intp]:
        """Positions of the samples sorted by id, as `sorted(..., key=id)` orders them (the UTF-8
        bytes of ids sort as their code points), in one fixed-width array rather than a list of ids."""
        width = max((len(i.encode("utf-8", "surrogatepass")) for i in self.ids()), default=1)
        keys = np.zeros(len(self), dtype=f"S{max(width, 1)}")
        for index, sample_id in enumerate(self.ids()):
            keys[index] = sample_id.encode("utf-8", "surrogatepass")
        return np.argsort(keys, kind="stable")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[type[SampleSpool], tuple[list[Sample]]]:
        return SampleSpool, (list(self),)  # a process that receives it gets a spool of its own

    def __repr__(self) -> str:
        return f"SampleSpool({len(self)} samples)"


def in_id_order(samples: Iterable[Sample]) -> Iterator[Sample]:
    """Samples sorted by id; a spool is sorted by an index array, never loaded whole."""
    if isinstance(samples, SampleSpool):
        for index in samples.id_order():
            yield samples[int(index)]
    else:
        yield from sorted(samples, key=lambda s: s.id)
