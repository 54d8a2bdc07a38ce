"""The gazetteer's borders: country polygons, their tiles and outline vertices, and the country grid.

A part of `Gazetteer` (gazetteer/index.py): `country_batch` answers most points from the grid
and the rest with one point-in-polygon test each; `country_shapes` is for map rendering.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.geo import to_unit_vectors
from geosleuth.gazetteer.build import GRID_MIXED, GRID_WATER
from geosleuth.gazetteer.nearest import BRUTE_FORCE_POINTS, brute_nearest
from geosleuth.gazetteer.saved import kd_tree

_GRID_EDGE = 1e-7
"""How close (in sub-cell units, ~1 mm) a point may come to a grid line before the exact path decides."""


class Borders:
    """Which country a point is in (Natural Earth admin-0 borders)."""

    @cached_property
    def _vertex_unit(self) -> NDArray[np.float64]:
        def build() -> NDArray[np.float64]:
            data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
            return to_unit_vectors(data["vertex_lat"], data["vertex_lon"])

        return self._tree_points("vertices", build)

    def _vertex_query(self, vectors: NDArray[np.float64]) -> NDArray[np.int64]:
        """The nearest outline vertex of each point (``_vertex_tree``; brute force for a few)."""
        if self._brute_force(len(vectors), "_vertex_tree"):
            hit = brute_nearest(self._vertex_unit, vectors, 1, rank=self._small_search.get("vertices"))
            if hit is not None:
                return hit[1]
        _, nearest = self._vertex_tree.query(vectors, k=1)
        return nearest  # type: ignore[no-any-return]

    @cached_property
    def _country_meta(self) -> list[dict[str, Any]]:
        """Country records (code, names) without their polygons: reverse geocoding needs only these."""
        text = (self.data_dir / "countries.json").read_text(encoding="utf-8")
        meta: list[dict[str, Any]] = json.loads(text)
        return meta

    @cached_property
    def _countries(self) -> tuple[list[dict[str, Any]], Any]:
        import shapely

        geoms = shapely.from_wkb(np.load(self.data_dir / "countries_wkb.npy", allow_pickle=True))
        return self._country_meta, geoms

    @cached_property
    def _owner_codes(self) -> NDArray[Any]:
        """The country code of each country record ("" for a territory without one)."""
        return np.array([m["code"] or "" for m in self._country_meta], dtype=object)

    @cached_property
    def _piece_codes(self) -> NDArray[Any]:
        """The country code of each 1-degree tile piece."""
        return self._owner_codes[np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)["owner"]]

    @cached_property
    def _vertex_owner(self) -> NDArray[np.int32]:
        """The country record of each outline vertex."""
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return data["vertex_owner"]  # type: ignore[no-any-return]

    @cached_property
    def _vertex_codes(self) -> NDArray[Any]:
        """The country code of each outline vertex."""
        return self._owner_codes[self._vertex_owner]

    @cached_property
    def _pieces(self) -> tuple[NDArray[Any], Any, NDArray[Any], Any]:
        """Country polygons cut into 1-degree tiles with their codes, and outline vertices.

        Returns (tile codes, tile STRtree, vertex codes, vertex KD-tree on the unit sphere).
        """
        return self._piece_codes, self._tile_tree, self._vertex_codes, self._vertex_tree

    @cached_property
    def _tile_tree(self) -> Any:
        """STRtree of the tile pieces (points on grid lines and where borders meet query it)."""
        import shapely

        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return shapely.STRtree(shapely.from_wkb(data["wkb"]))

    @cached_property
    def _vertex_tree(self):  # type: ignore[no-untyped-def]
        """KD-tree of the country outline vertices on the unit sphere (the off-shore fallback)."""
        saved = self._saved_trees.get("vertices")
        if saved is not None:
            return saved
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return kd_tree(to_unit_vectors(data["vertex_lat"], data["vertex_lon"]))

    def country_shapes(self) -> dict[str, Any]:
        """Country geometries by alpha-2 (parts of one country merged), for map rendering."""
        import shapely

        meta, geoms = self._countries
        grouped: dict[str, list[Any]] = {}
        for m, g in zip(meta, geoms, strict=True):
            if m["code"]:
                grouped.setdefault(m["code"], []).append(g)
        return {
            code: parts[0] if len(parts) == 1 else shapely.union_all(parts) for code, parts in grouped.items()
        }

    @cached_property
    def _grid(self) -> tuple[NDArray[np.int32], NDArray[np.int32], NDArray[Any]]:
        """The country lookup grid (see `build._country_grid`) and the country code of each index;
        memory-mapped when saved beside the trees (a small batch reads a few of its cells)."""
        saved = self._small_search
        if "grid_cells" in saved and "grid_blocks" in saved:
            return saved["grid_cells"], saved["grid_blocks"], self._owner_codes
        data = np.load(self.data_dir / "country_grid.npz")
        return data["cells"], data["blocks"], self._owner_codes

    @cached_property
    def _grid_pieces(self) -> Any:
        """Every tile piece, prepared: the pieces single-piece sub-cells point to."""
        import shapely

        pieces = self._tile_tree.geometries
        shapely.prepare(pieces)
        return pieces

    def _pieces_at(self, piece: NDArray[np.int64]) -> Any:
        """The prepared tile pieces ``piece``: a few are decoded alone (the tile tree is not built)."""
        import shapely

        if "_tile_tree" in self.__dict__ or piece.size > BRUTE_FORCE_POINTS:
            return self._grid_pieces[piece]
        pieces = shapely.from_wkb(self._wkb_of(piece))
        shapely.prepare(pieces)
        return pieces

    def _wkb_of(self, piece: NDArray[np.intp]) -> NDArray[Any]:
        """The WKB of the tile pieces ``piece``: sliced from the saved packed copy when there is one
        (unpickling every piece's bytes costs more than a small batch's whole search)."""
        if "_pieces_wkb" in self.__dict__ or "tile_wkb" not in self._small_search:
            return self._pieces_wkb[piece]
        buf, ends = self._small_search["tile_wkb"], self._small_search["tile_wkb_ends"]
        out = np.empty(piece.shape, dtype=object)
        for pos, i in np.ndenumerate(piece):
            out[pos] = buf[ends[i - 1] if i > 0 else 0 : ends[i]].tobytes()
        return out

    @cached_property
    def _pieces_wkb(self) -> NDArray[Any]:
        data = np.load(self.data_dir / "country_pieces.npz", allow_pickle=True)
        return data["wkb"]  # type: ignore[no-any-return]

    def _few_tile_hits(
        self, x: NDArray[np.float64], y: NDArray[np.float64]
    ) -> tuple[NDArray[np.intp], NDArray[np.intp]] | None:
        """``_tile_tree.query(points, predicate="intersects")`` for a few points, without the tree.

        A piece can hold a point only if its bounding box (closed, saved at build time) does:
        those pieces alone are decoded and tested. A point is written with the code of its last
        hit, in the tree's order: so a point whose hits disagree (on a border) is left to the tree.
        """
        bounds = self._small_search.get("tile_bounds")
        if bounds is None or "_tile_tree" in self.__dict__ or x.size > BRUTE_FORCE_POINTS:
            return None
        import shapely

        points: list[NDArray[np.intp]] = []
        pieces: list[NDArray[np.intp]] = []
        for j, (px, py) in enumerate(zip(x, y, strict=True)):
            box = (bounds[:, 0] <= px) & (bounds[:, 2] >= px) & (bounds[:, 1] <= py) & (bounds[:, 3] >= py)
            candidates = np.flatnonzero(box)
            hits = candidates[shapely.intersects_xy(shapely.from_wkb(self._wkb_of(candidates)), px, py)]
            if len(set(self._piece_codes[hits].tolist())) > 1:  # not np.unique: it imports numpy.ma
                return None
            points.append(np.full(hits.size, j, dtype=np.intp))
            pieces.append(hits)
        return np.concatenate(points), np.concatenate(pieces)

    def country_batch(self, lats: ArrayLike, lons: ArrayLike) -> tuple[NDArray[Any], NDArray[np.bool_]]:
        """Country code by polygon containment; off-shore points take the nearest polygon.

        Returns (codes, on_land). Codes are "" where the point is invalid or the containing
        polygon is a territory without an ISO code. Most points are answered by the lookup
        grid; a point in a sub-cell that one border crosses is tested against that one piece,
        and only points where borders meet (or on a grid line) query the tile tree.
        """
        la, lo = np.asarray(lats, dtype=np.float64).ravel(), np.asarray(lons, dtype=np.float64).ravel()
        out = np.full(la.shape, "", dtype=object)
        on_land = np.zeros(la.shape, dtype=bool)
        ok = np.flatnonzero(np.isfinite(la) & np.isfinite(lo))
        if not ok.size:
            return out, on_land
        state = self._grid_state(la[ok], lo[ok])
        land = state >= 0
        out[ok[land]] = self._grid[2][state[land]]
        on_land[ok[land]] = True
        water = state == GRID_WATER
        crossed = np.flatnonzero(state <= -3)
        if crossed.size:  # one border crosses the sub-cell: one point-in-polygon test each
            import shapely

            piece = -3 - state[crossed]
            rows = ok[crossed]
            hit = np.asarray(shapely.intersects_xy(self._pieces_at(piece), lo[rows], la[rows]), dtype=bool)
            out[rows[hit]] = self._piece_codes[piece[hit]]
            on_land[rows[hit]] = True
            water[crossed[~hit]] = True
        exact = np.flatnonzero(state == GRID_MIXED)
        if exact.size:
            water[exact] = self._tree_countries(ok[exact], la, lo, out, on_land)
        if water.any():  # off-shore: the country of the nearest border or coast vertex
            off = ok[water]
            nearest = self._vertex_query(to_unit_vectors(la[off], lo[off]))
            out[off] = self._owner_codes[self._vertex_owner[nearest]]
        return out, on_land

    def _grid_state(self, la: NDArray[np.float64], lo: NDArray[np.float64]) -> NDArray[np.int32]:
        """Per point: a country index, `GRID_WATER`, ``-3 - piece`` or `GRID_MIXED` (see `_grid`).

        Points on a cell or sub-cell edge (within float rounding) are `GRID_MIXED`: they may
        touch two pieces, and only the tile tree answers those exactly as before.
        """
        cells, blocks, _ = self._grid
        n = blocks.shape[1]
        state = np.full(la.shape, GRID_MIXED, dtype=np.int32)
        inside = np.flatnonzero((la >= -90) & (la < 90) & (lo >= -180) & (lo < 180))
        lat, lon = la[inside], lo[inside]
        y, x = np.floor(lat), np.floor(lon)
        value = cells[y.astype(np.int64) + 90, x.astype(np.int64) + 180]
        edge = (lat == y) | (lon == x)
        sub = np.flatnonzero(value <= -3)
        fy, fx = (lat[sub] - y[sub]) * n, (lon[sub] - x[sub]) * n
        iy, ix = np.floor(fy), np.floor(fx)
        near = np.minimum.reduce([fy - iy, iy + 1 - fy, fx - ix, ix + 1 - fx]) < _GRID_EDGE
        iy, ix = np.clip(iy, 0, n - 1).astype(np.int64), np.clip(ix, 0, n - 1).astype(np.int64)
        value[sub] = np.where(near, GRID_MIXED, blocks[-3 - value[sub], iy, ix])
        value[edge] = GRID_MIXED
        state[inside] = value
        return state

    def _tree_countries(
        self, rows: NDArray[np.int64], la: NDArray[np.float64], lo: NDArray[np.float64], out: NDArray[Any],
        on_land: NDArray[np.bool_],
    ) -> NDArray[np.bool_]:  # fmt: skip
        """Polygon containment through the tile tree for ``rows``; returns which were off-shore."""
        import shapely

        codes = self._piece_codes
        few = self._few_tile_hits(lo[rows], la[rows])
        if few is not None:
            hit_point, hit_piece = few
        else:
            points = shapely.points(lo[rows], la[rows])
            hit_point, hit_piece = self._tile_tree.query(points, predicate="intersects")
        out[rows[hit_point]] = codes[hit_piece]
        on_land[rows[hit_point]] = True
        missing = np.ones(rows.size, dtype=bool)
        missing[hit_point] = False
        return missing
