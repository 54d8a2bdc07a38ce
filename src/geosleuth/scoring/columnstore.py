"""Column stores the scorer reduces rows into: growing NumPy columns, interned strings, capped
message lists, a duplicate-id finder and a reservoir sample, each in bounded memory per row."""

from __future__ import annotations

import math
import mmap
import random
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import numpy as np
from numpy.typing import NDArray

CHUNK = 16_384
"""Rows buffered as Python values before they become NumPy columns and are scored."""
FILTER_BITS = 1 << 25
"""Slots of the duplicate-id filter (4 MiB): at a million ids about 3 % of lookups search the chunks."""
SHOWN = 10
"""Problems and line numbers listed in warnings before a count of the rest."""
SPOOL_BYTES = 1 << 20
"""Text bytes a `Texts` column keeps in memory before moving them to its temporary file."""
LANGUAGE_SAMPLE = 2_000
"""Name pairs per level kept (reservoir sample) for the script-mismatch warning."""


class Growing:
    """A column appended in Python lists and frozen, a chunk at a time, into one NumPy array in an
    anonymous memory map of its own.

    The map grows by doubling and is unmapped once no array views the old one, so a million-row
    column returns its memory to the system when replaced (chunks concatenated on the heap left
    holes the allocator kept: about the columns' size again in resident memory), and capacity the
    column never fills is never touched, so it costs no resident memory.
    """

    def __init__(self, dtype: Any) -> None:
        self.dtype = np.dtype(dtype)
        self.buffer: list[Any] = []  # one list for the column's life: callers may bind its append
        self.n = 0
        self._data: NDArray[Any] = np.zeros(0, dtype=self.dtype)

    def append(self, value: Any) -> None:
        self.buffer.append(value)

    def flush(self) -> None:
        if self.buffer:
            values = np.array(self.buffer, dtype=self.dtype)
            self.buffer.clear()
            self.extend(values)

    def extend(self, values: NDArray[Any]) -> None:
        """Append a frozen chunk (after the buffered values, which are flushed first)."""
        if self.buffer:
            self.flush()
        end = self.n + values.size
        if end > self._data.size:
            self._data = _mapped_copy(self._data[: self.n], max(end, 2 * self._data.size, MIN_CAPACITY))
        self._data[self.n : end] = values
        self.n = end

    def replace(self, values: NDArray[Any]) -> None:
        """The whole column set to ``values`` (as many rows as it has)."""
        self.flush()
        if values.size != self.n:
            raise ValueError(f"{values.size} values for a column of {self.n} rows")
        self._data[: self.n] = values

    def array(self) -> NDArray[Any]:
        self.flush()
        return self._data[: self.n]


MIN_CAPACITY = 4_096
"""Rows a column's first map holds (a page or a few: small columns stay small)."""


def _mapped_copy(values: NDArray[Any], capacity: int) -> NDArray[Any]:
    """``values`` copied to the head of a new anonymous map of ``capacity`` rows (the map lives
    as long as an array views it)."""
    size = max(capacity * values.dtype.itemsize, 1)
    private = getattr(mmap, "MAP_PRIVATE", None)  # copy-on-write in a forked child, as heap memory is
    mapping = mmap.mmap(-1, size) if private is None else mmap.mmap(-1, size, flags=private)
    data = np.frombuffer(mapping, dtype=values.dtype, count=capacity)
    data[: values.size] = values
    return data


class Interned:
    """Strings as int32 codes into one table (repeated labels and group names cost 4 bytes)."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {"": 0}
        self.table: list[str] = [""]
        self.column = Growing(np.int32)

    def append(self, value: str | None) -> None:
        self.column.append(self.code(value))

    def code(self, value: str | None) -> int:
        """The code of ``value`` (a new one for a string not seen before)."""
        key = value or ""
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.table)
            self.table.append(key)
        return code

    def values(self) -> NDArray[np.object_]:
        return np.array(self.table, dtype=object)[self.column.array()]


class Texts(Sequence[str | None]):
    """A string (or None) per row: end offsets in memory, the UTF-8 bytes in a temporary file past
    the first `SPOOL_BYTES` (a million-row run's ids and city names cost 9 bytes a row, not a Python
    object nor their text each)."""

    def __init__(self) -> None:
        self.blob = bytearray()  # the bytes not yet spooled; they follow the file's
        self.spooled = 0
        self.file: BinaryIO | None = None
        self.ends = Growing(np.int64)
        self.none = Growing(bool)
        self.n = 0

    def append(self, value: str | None) -> None:
        if value is not None:
            self.blob += value.encode("utf-8", "surrogatepass")
        self.ends.append(self.spooled + len(self.blob))
        self.none.append(value is None)
        self.n += 1
        if len(self.ends.buffer) >= CHUNK:
            self.ends.flush()
            self.none.flush()
        if len(self.blob) >= SPOOL_BYTES:
            self._spool()

    def _spool(self) -> None:
        if self.file is None:  # unlinked at once on POSIX, removed on close elsewhere
            self.file = tempfile.TemporaryFile(prefix="geosleuth-texts-", buffering=0)  # noqa: SIM115 - lives as long as the column
        self.file.seek(self.spooled)
        self.file.write(self.blob)
        self.spooled += len(self.blob)
        self.blob = bytearray()

    def _bytes(self, start: int, end: int) -> bytes:
        if start >= self.spooled:
            return bytes(self.blob[start - self.spooled : end - self.spooled])
        assert self.file is not None
        self.file.seek(start)
        head = self.file.read(min(end, self.spooled) - start)
        return head + bytes(self.blob[: max(end - self.spooled, 0)])

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> str | None:  # type: ignore[override]
        if not -self.n <= i < self.n:
            raise IndexError(i)
        i %= self.n
        if self.none.array()[i]:
            return None
        ends = self.ends.array()
        start = int(ends[i - 1]) if i else 0
        return self._bytes(start, int(ends[i])).decode("utf-8", "surrogatepass")


class Capped:
    """The first few messages of a kind and how many there were."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self.count = 0

    def add(self, message: str) -> None:
        self.count += 1
        if len(self.items) < SHOWN:
            self.items.append(message)


def merged_problems(groups: Sequence[Capped | list[str]]) -> list[str]:
    """The first ten problems across kinds, in order, then a count of the rest."""
    shown: list[str] = []
    total = 0
    for g in groups:
        items, count = (g, len(g)) if isinstance(g, list) else (g.items, g.count)
        total += count
        shown.extend(items[: max(0, SHOWN - len(shown))])
    if total > SHOWN:
        shown.append(f"… and {total - SHOWN} more")
    return shown


class DuplicateIds:
    """Duplicate ids found in bounded memory: 64-bit hashes in sorted NumPy chunks, not a dict.

    Rows are buffered and checked a chunk at a time, vectorised: against the earlier chunks
    (a one-bit-per-slot filter, then a binary search in each sorted chunk) and within the chunk
    (a stable sort). Duplicates are reported in row order, each with the line of its first sighting.
    """

    def __init__(self, report: Callable[[str, int, int], None]) -> None:
        self.report = report
        self.sorted: list[tuple[NDArray[np.int64], NDArray[np.int32]]] = []
        self.sids: list[str] = []
        self.lines: list[int] = []
        # one bit per hash slot, set for frozen ids: most rows skip the sorted chunks altogether
        self.filter = np.zeros(FILTER_BITS // 8, dtype=np.uint8)

    def add(self, sid: str, line: int) -> None:
        self.sids.append(sid)
        self.lines.append(line)
        if len(self.sids) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        """Check the buffered rows, report their duplicates and freeze their new ids."""
        if not self.sids:
            return
        sids, self.sids = self.sids, []
        keys = np.fromiter(map(hash, sids), dtype=np.int64, count=len(sids))
        lines = np.array(self.lines, dtype=np.int32)
        self.lines = []
        first = self._frozen_lines(keys)  # 0 where the id was not seen in an earlier chunk
        order = np.argsort(keys, kind="stable")
        ordered = keys[order]
        starts = np.ones(ordered.size, dtype=bool)
        starts[1:] = ordered[1:] != ordered[:-1]
        run_first = lines[order][np.maximum.accumulate(np.where(starts, np.arange(ordered.size), 0))]
        within = np.empty_like(lines)
        within[order] = np.where(starts, 0, run_first)  # a repeat inside this chunk: its run's first line
        first = np.where(first > 0, first, within)
        for i in np.flatnonzero(first > 0):
            self.report(sids[i], int(lines[i]), int(first[i]))
        new = order[starts]
        new = new[first[new] == 0]
        self._freeze(keys[new], lines[new])

    def _frozen_lines(self, keys: NDArray[np.int64]) -> NDArray[np.int32]:
        out = np.zeros(keys.size, dtype=np.int32)
        slots = keys & (FILTER_BITS - 1)
        maybe = np.flatnonzero((self.filter[slots >> 3] >> (slots & 7)) & 1)
        for frozen_keys, frozen_lines in self.sorted:
            if not maybe.size:
                break
            at = np.minimum(np.searchsorted(frozen_keys, keys[maybe]), frozen_keys.size - 1)
            hit = frozen_keys[at] == keys[maybe]
            out[maybe[hit]] = frozen_lines[at[hit]]
            maybe = maybe[~hit]
        return out

    def _freeze(self, keys: NDArray[np.int64], lines: NDArray[np.int32]) -> None:
        if not keys.size:
            return
        order = np.argsort(keys, kind="stable")
        self.sorted.append((keys[order], lines[order]))
        slots = keys & (FILTER_BITS - 1)
        np.bitwise_or.at(self.filter, slots >> 3, np.left_shift(1, slots & 7).astype(np.uint8))
        while len(self.sorted) > 1 and self.sorted[-1][0].size >= self.sorted[-2][0].size:
            (k1, l1), (k2, l2) = self.sorted[-2], self.sorted.pop()  # merge like a binary counter
            keys, lines = np.concatenate([k1, k2]), np.concatenate([l1, l2])
            order = np.argsort(keys, kind="stable")
            self.sorted[-1] = (keys[order], lines[order])

    def contains(self, sid: str) -> bool:
        return bool(self.contains_all([sid])[0])

    def contains_all(self, sids: Sequence[str]) -> NDArray[np.bool_]:
        """Which of ``sids`` were added, in one vectorised pass (a dataset of 10^6 ids included)."""
        self.flush()
        keys = np.fromiter(map(hash, sids), dtype=np.int64, count=len(sids))
        return self._frozen_lines(keys) > 0


class Reservoir:
    """A seeded uniform sample of (predicted, truth) name pairs for the language warning.

    Li's Algorithm L: the gap to the next replacement is drawn directly, so past the first
    ``size`` pairs a pair costs a comparison, not a random draw (O(size·log(n/size)) draws).
    """

    def __init__(self, size: int = LANGUAGE_SAMPLE) -> None:
        self.size = size
        self.items: list[tuple[str, str]] = []
        self.seen = 0
        self.rng = random.Random(0)
        self.weight = 1.0
        self.next = size  # index (0-based count) of the next pair that replaces one in the sample

    def add(self, pair: tuple[str, str]) -> None:
        i = self.seen
        self.seen += 1
        if i != self.next and i >= self.size:
            return  # most pairs: no replacement until the drawn gap has passed
        if i < self.size:
            self.items.append(pair)
            if self.seen == self.size:
                self._skip()
        elif i == self.next:
            self.items[self.rng.randrange(self.size)] = pair
            self._skip()

    def _skip(self) -> None:
        rng = self.rng
        self.weight *= math.exp(math.log(1.0 - rng.random()) / self.size)
        if 0.0 < self.weight < 1.0:
            gap = math.floor(math.log(1.0 - rng.random()) / math.log1p(-self.weight))
        else:  # float edge cases: W = 1 replaces the next pair, W = 0 never replaces again
            gap = 0 if self.weight >= 1.0 else sys.maxsize
        self.next += gap + 1 if self.seen > self.size else gap
