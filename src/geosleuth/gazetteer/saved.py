"""What a gazetteer build saves so that later processes need not rebuild it: trees, arrays, tables.

A part of `Gazetteer` (gazetteer/index.py). The file names and keys here are the built
index's format: `save_trees` writes them once, the other parts read them when present.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.countries import tables_sources
from geosleuth.gazetteer.build import COUNTRY_TABLES
from geosleuth.gazetteer.nearest import BRUTE_FORCE_POINTS

SAVED_TREES = "kdtrees.pkl"
"""The reverse-geocoding KD-trees, pickled at build time (`Gazetteer.save_trees`)."""

SMALL_SEARCH = "small_search.json"
"""What a small batch needs instead of the trees (no SciPy import, no tile tree), saved with them:
each KD-tree's points and each point's position in the tree's ``indices`` (a brute-force search
over the very points of the tree breaks ties between identical points as the tree does, see
`nearest`), each tile piece's bounding box and WKB (packed), the country grid and the packed
place-name columns with their string bounds. This file names the SciPy
version and the arrays; each is ``small_search.<name>.npy`` beside it, memory-mapped when read."""

_RANKED_TREES = ("sphere", "big", "vertices")

CITY_TEXT = ("name", "admin1", "admin2", "cc")

_BRUTE_FORCE_BUDGET = 256  # points a process searches by brute force before it loads the trees


def kd_tree(points: NDArray[np.float64]):  # type: ignore[no-untyped-def]
    from scipy.spatial import cKDTree

    return cKDTree(points)


class _LazyArrays(dict):  # type: ignore[type-arg]
    """Saved arrays by name, each memory-mapped on first use."""

    def __init__(self, paths: dict[str, Path]) -> None:
        super().__init__()
        self._paths = paths

    def __missing__(self, key: str) -> NDArray[Any]:
        value = np.load(self._paths[key], mmap_mode="r")
        self[key] = value
        return value  # type: ignore[no-any-return]

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self else default  # noqa: SIM401 - self.get is this method

    def __contains__(self, key: object) -> bool:
        return key in self._paths


def packed_bounds(buf: NDArray[np.uint8]) -> tuple[NDArray[np.uint8], NDArray[np.intp]]:
    """A packed string column (`build.pack_strings`) and where its strings start and end."""
    return buf, np.concatenate([[-1], np.flatnonzero(buf == 10), [buf.size]])


def tree_rank(tree: Any) -> NDArray[np.int32]:
    """Each point's position in the tree's leaf order (``tree.indices``)."""
    rank = np.empty(tree.n, dtype=np.int32)
    rank[tree.indices] = np.arange(tree.n, dtype=np.int32)
    return rank


class SavedParts:
    """The saved KD-trees (`SAVED_TREES`), small-batch arrays (`SMALL_SEARCH`) and country tables."""

    def _tree_points(self, name: str, build: Callable[[], NDArray[np.float64]]) -> NDArray[np.float64]:
        """The points of tree ``name`` as saved beside it (`SMALL_SEARCH`), else as built for it."""
        saved = self._small_search.get(f"{name}_points")
        return saved.T if saved is not None else build()  # type: ignore[no-any-return]

    def _brute_force(self, points: int, tree: str) -> bool:
        """Whether to search ``points`` points without ``tree``: it is not loaded yet, the batch
        is small, and this process has searched few points so (a long-lived process that keeps
        asking soon loads the trees, whose queries are far cheaper)."""
        if tree in self.__dict__ or points > BRUTE_FORCE_POINTS:
            return False
        left = self.__dict__.get("_brute_left", _BRUTE_FORCE_BUDGET)
        self.__dict__["_brute_left"] = left - points
        return left >= points

    @cached_property
    def _saved_trees(self) -> dict[str, Any]:
        """The KD-trees (and derived arrays) `save_trees` wrote at build time, if this SciPy wrote them.

        Loading a tree copies its arrays (a fraction of building it: bench/gazetteer_bench.py) and
        gives the very tree building would: same points, same deterministic construction, so the
        same neighbours and ties.
        """
        path = self.data_dir / SAVED_TREES
        if not path.exists():
            return {}
        import pickle

        import scipy

        with path.open("rb") as fh:
            saved = pickle.load(fh)  # noqa: S301 - written by this package's own build step
        return saved["trees"] if saved.get("scipy") == scipy.__version__ else {}

    @cached_property
    def _small_search(self) -> dict[str, NDArray[Any]]:
        """What `save_trees` saved for small batches (see `SMALL_SEARCH`), if this SciPy's trees
        were saved; each array is mapped on first use (a small batch reads a few pages of most)."""
        path = self.data_dir / SMALL_SEARCH
        if not path.exists():
            return {}
        import scipy  # the package alone, not scipy.spatial (bench/gazetteer_bench.py times both)

        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.get("scipy") != scipy.__version__:
            return {}
        return _LazyArrays({key: self.data_dir / f"small_search.{key}.npy" for key in saved["arrays"]})

    def saved_country_tables(self) -> dict[str, dict[str, str]] | None:
        """The country tables saved at build time, when the same CLDR (babel) version wrote them."""
        return self._country_tables

    @cached_property
    def _country_tables(self) -> dict[str, dict[str, str]] | None:
        path = self.data_dir / COUNTRY_TABLES
        if not path.exists():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        if saved.pop("sources", None) != tables_sources():
            return None
        return saved  # type: ignore[no-any-return]

    def save_trees(self) -> None:
        """Build every reverse-geocoding KD-tree now and save them, so each later process loads
        them instead (done once, when a freshly built index is first opened)."""
        import pickle

        import scipy
        import shapely

        trees = {
            "sphere": self._city_tree, "big": self._big_city_tree, "latlon": self._city_degree_tree,
            "vertices": self._vertex_tree, "big_near_km": self._big_city_near_km,
        }  # fmt: skip
        tmp = self.data_dir / f"{SAVED_TREES}.tmp{os.getpid()}"
        with tmp.open("wb") as fh:
            pickle.dump({"scipy": scipy.__version__, "trees": trees}, fh, protocol=5)
        saved_arrays: dict[str, NDArray[Any]] = {name: tree_rank(trees[name]) for name in _RANKED_TREES}
        # stored one coordinate after another: a brute-force search reads each as one array
        saved_arrays |= {f"{name}_points": np.ascontiguousarray(trees[name].data.T) for name in _RANKED_TREES}
        saved_arrays["tile_bounds"] = shapely.bounds(self._tile_tree.geometries)
        grid = np.load(self.data_dir / "country_grid.npz")
        saved_arrays["grid_cells"], saved_arrays["grid_blocks"] = grid["cells"], grid["blocks"]
        rg = np.load(self.data_dir / "rg.npz")
        for col in CITY_TEXT:
            saved_arrays[f"rg_{col}"], saved_arrays[f"rg_{col}_bounds"] = packed_bounds(rg[col])
        wkb = self._pieces_wkb
        saved_arrays["tile_wkb"] = np.frombuffer(b"".join(wkb), dtype=np.uint8)
        saved_arrays["tile_wkb_ends"] = np.cumsum([len(b) for b in wkb], dtype=np.int64)
        for key, array in saved_arrays.items():  # each file whole (renamed into place), the list last
            tmp_array = self.data_dir / f"small_search.{key}.tmp{os.getpid()}.npy"
            np.save(tmp_array, array)
            os.replace(tmp_array, self.data_dir / f"small_search.{key}.npy")
        tmp_list = self.data_dir / f"{SMALL_SEARCH}.tmp{os.getpid()}"
        listing = json.dumps({"scipy": scipy.__version__, "arrays": sorted(saved_arrays)})
        tmp_list.write_text(listing, encoding="utf-8")
        os.replace(tmp_list, self.data_dir / SMALL_SEARCH)
        os.replace(tmp, self.data_dir / SAVED_TREES)  # another process never reads half a file
