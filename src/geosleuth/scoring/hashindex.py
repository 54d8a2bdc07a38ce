"""An index of string keys held elsewhere (a spool, a log): their 64-bit hashes sorted in one
NumPy array beside an integer payload each (where the key's row lies), 16 bytes an entry.

A lookup is a binary search for the hash; the entries that share it (the same key written
again, or two keys whose hashes collide) come back in the order they were added, and the caller
reads their keys back to tell them apart, so a collision never joins the wrong row. The callers
hash their keys themselves (Python's ``hash``, which their tests replace to force collisions).

Used by the ground truth of ``score --truth`` (`geosleuth.scoring.truthindex`) and the report's
trajectory index (`geosleuth.eval.report.rundata`).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from numpy.typing import ArrayLike, NDArray


class HashIndex:
    """Sorted key hashes and their payloads; equal hashes keep the order they were added in."""

    def __init__(self, hashes: ArrayLike, payloads: ArrayLike) -> None:
        keys = np.asarray(hashes, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self.keys: NDArray[np.int64] = keys[order]
        self.payloads: NDArray[np.int64] = np.asarray(payloads, dtype=np.int64)[order]

    def __len__(self) -> int:
        return int(self.keys.size)

    def entries(self, key_hash: int) -> NDArray[np.int64]:
        """The payloads of the entries with this hash, in the order they were added."""
        low = int(np.searchsorted(self.keys, key_hash, side="left"))
        high = int(np.searchsorted(self.keys, key_hash, side="right"))
        return self.payloads[low:high]

    def shared(self) -> Iterator[NDArray[np.int64]]:
        """The payloads of each hash held by two entries or more, in the order they were added."""
        same = np.flatnonzero(self.keys[1:] == self.keys[:-1])
        if not same.size:
            return
        breaks = np.flatnonzero(np.diff(same) != 1)
        starts = np.concatenate([[same[0]], same[breaks + 1]])
        stops = np.concatenate([same[breaks], [same[-1]]]) + 2
        for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
            yield self.payloads[start:stop]

    def without(self, dropped: NDArray[np.bool_]) -> HashIndex:
        """The index without the entries whose payload ``p`` has ``dropped[p]`` set."""
        out = HashIndex.__new__(HashIndex)
        kept = ~dropped[self.payloads]
        out.keys, out.payloads = self.keys[kept], self.payloads[kept]
        return out
