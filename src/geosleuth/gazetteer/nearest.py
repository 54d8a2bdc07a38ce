"""Nearest neighbours of a few points by brute force, answering exactly as SciPy's ``cKDTree``.

A small batch (a 10-row file) pays more for ``import scipy.spatial`` and loading the saved trees
than for comparing its points with every stored point (bench/gazetteer_bench.py measures all
three). The answer must be the
tree's, ties included, so the search gives up (returns ``None``, and the caller asks the tree)
wherever the tree could answer otherwise:

- distances are computed as ``cKDTree.query`` computes them for p = 2: the squared coordinate
  differences summed in dimension order, ``((d0² + d1²) + d2²)``, then ``sqrt``; a point is
  taken when its squared distance is ``<`` the squared bound (``bound * bound``). The floats
  are the tree's where its C++ does not fuse ``r += d * d`` into one rounding (no FMA in
  SciPy's x86-64 wheels); `tests/gazetteer/test_small_batches.py` compares them with the
  installed SciPy's. Where a build does fuse it, the neighbours stay the tree's (a last-bit
  difference matters only at a near-tie, which goes to the tree) but a distance could differ
  in its last bit, which that test reports;
- the tree keeps the first point it meets among equal distances, and its pruning compares
  rounded box distances: so when two of the ranked candidates (the ``k`` nearest and the next
  one) lie within a relative ``TIE_GAP`` of each other, or one lies that close to the bound,
  the tree decides;
- except for one case, common in GeoNames (a town and its municipality share coordinates): for
  ``k == 1``, when every candidate that close is the same point. Identical points always fall
  in one leaf (a split compares coordinates, so equal ones go the same way), and a leaf is
  scanned in the tree's index order, taking a point only if it is strictly nearer: the tree
  answers the one earliest in that order. ``rank`` (each point's position in the tree's
  ``indices``, saved at build time) names it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

BRUTE_FORCE_POINTS = 32
"""Batches up to this many points are searched by brute force (when it is sure of the answer)."""

TIE_GAP = 1e-9
"""Relative gap between two candidates' squared distances below which the tree decides."""


def brute_nearest(
    data: NDArray[np.float64],
    queries: NDArray[np.float64],
    k: int = 1,
    bound: float = np.inf,
    rank: NDArray[np.integer] | None = None,
) -> tuple[NDArray[np.float64], NDArray[np.intp]] | None:
    """``cKDTree(data).query(queries, k=k, distance_upper_bound=bound)``, or ``None`` near a tie.

    Shapes as the tree's: ``(m,)`` for ``k == 1``, else ``(m, k)``; a missing neighbour is
    ``inf`` with index ``len(data)``. ``rank``: each point's position in the tree's ``indices``.
    """
    n = data.shape[0]
    if n <= k:
        return None
    bound_sq = bound * bound
    columns = [np.ascontiguousarray(data[:, j]) for j in range(data.shape[1])]
    dist = np.full((len(queries), k), np.inf)
    index = np.full((len(queries), k), n, dtype=np.intp)
    for row, q in enumerate(queries):
        sq = _squared_distances(columns, q)
        if k == 1:  # the nearest and every point as near (no partition of the whole array)
            ranked = np.flatnonzero(sq <= sq.min() * (1 + TIE_GAP))
            s = sq[ranked]
            ranked, s = ranked[np.argsort(s, kind="stable")], np.sort(s, kind="stable")
        else:
            ranked = np.argpartition(sq, k)[: k + 1]
            ranked = ranked[np.argsort(sq[ranked], kind="stable")]
            s = sq[ranked]
        taken = min(k, int(np.count_nonzero(s[:k] < bound_sq)))
        near = s * (1 + TIE_GAP)
        if np.any((s[:k] < bound_sq * (1 + TIE_GAP)) & (near[:k] >= bound_sq)):
            return None
        if np.any(s[1 : taken + 1] <= near[:taken]):
            first = _first_of_same_point(data, sq, near[0], rank) if k == 1 else None
            if first is None:
                return None
            ranked[0] = first
        dist[row, :taken] = np.sqrt(s[:taken])
        index[row, :taken] = ranked[:taken]
    if k == 1:
        return dist[:, 0], index[:, 0]
    return dist, index


def _squared_distances(columns: list[NDArray[np.float64]], q: NDArray[np.float64]) -> NDArray[np.float64]:
    """Squared distances from ``q`` to every point, summed in dimension order (as the tree does)."""
    total = np.subtract(columns[0], q[0])
    np.multiply(total, total, out=total)
    d = np.empty_like(total)
    for col, x in zip(columns[1:], q[1:], strict=True):
        np.subtract(col, x, out=d)
        np.multiply(d, d, out=d)
        total += d
    return total


def _first_of_same_point(
    data: NDArray[np.float64], sq: NDArray[np.float64], near: float, rank: NDArray[np.integer] | None
) -> int | None:
    """The point the tree answers when every candidate within ``near`` is one and the same
    point (see the module docstring); ``None`` when they differ or no ``rank`` is known."""
    if rank is None:
        return None
    group = np.flatnonzero(sq <= near)
    if not (data[group] == data[group[0]]).all():
        return None
    return int(group[np.argmin(rank[group])])
