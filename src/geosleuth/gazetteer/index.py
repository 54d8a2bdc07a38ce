"""Query the offline gazetteer: forward search, reverse geocoding, nearby places, names in text.

`Gazetteer` is a thin facade over its parts, one idea each: `names` (name search), `places`
(stored places, nearby places, place trees), `borders` (countries and the country grid) and
`saved` (what a build saves for later processes). Loading is lazy and cheap (NumPy arrays + a
SQLite file opened read-only); each part (KD-trees, polygons) is built on the first call that
needs it.
"""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from geosleuth.core.countries import use_saved_tables
from geosleuth.core.geo import chord_to_km, haversine_km, to_unit_vectors
from geosleuth.core.records import Place, ReversePlace
from geosleuth.gazetteer.borders import Borders
from geosleuth.gazetteer.names import NameMatch, NameSearch
from geosleuth.gazetteer.places import PlaceRow, PlaceStore
from geosleuth.gazetteer.saved import SAVED_TREES, SMALL_SEARCH, SavedParts

__all__ = ["SAVED_TREES", "SMALL_SEARCH", "Gazetteer", "NameMatch", "PlaceRow", "get_gazetteer"]

log = logging.getLogger(__name__)

_RETRY_PLACES = 8  # places searched for one in the polygon's country, near a border
_OVERLAP_POINTS = 2048  # batches this large run the polygon step beside the place search
_POOL_LOCK = threading.Lock()
_POOL: list[ThreadPoolExecutor] = []


class Gazetteer(NameSearch, PlaceStore, Borders, SavedParts):
    """Offline places from GeoNames and country borders from Natural Earth."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = Path(data_dir)
        self._local = threading.local()

    def reverse_batch(self, lats: ArrayLike, lons: ArrayLike) -> dict[str, NDArray[Any]]:
        """Country by polygon; admin-1/admin-2/city from the GeoNames place that the point belongs to.

        That is the nearest place in the polygon's country, except that a large city within
        its reach (see `_city_reach_km`) wins over a nearer suburb. Points are processed in
        1-degree cell order (neighbours walk the same KD-tree and grid paths, about a third
        faster on large batches); the place indices come back in the caller's order and the
        name columns are built once, in that order.
        """
        codes, on_land, chosen, dist = self._reverse_in_cell_order(lats, lons)
        city, admin1, admin2 = (self._city_text_at(c, chosen) for c in ("name", "admin1", "admin2"))
        return {
            "country_code": codes, "admin1": admin1, "admin2": admin2, "city": city,
            "city_distance_km": chord_to_km(dist), "on_land": on_land,
        }  # fmt: skip

    def place_population_batch(
        self, lats: ArrayLike, lons: ArrayLike
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """GeoNames population of the place each point belongs to (the place `reverse_batch` names)
        and the distance to it in km; 0 and NaN where no place is chosen (no coordinates)."""
        _, _, chosen, dist = self._reverse_in_cell_order(lats, lons)
        population = np.zeros(chosen.size, dtype=np.int64)
        found = chosen >= 0
        population[found] = self._place_population[chosen[found]]
        return population, chord_to_km(dist)

    @cached_property
    def _place_population(self) -> NDArray[np.int64]:
        """Population of each reverse-geocoding place (GeoNames, as the build matched it)."""
        path = self.data_dir / "rg_population.npy"
        if not path.exists():
            raise RuntimeError(f"{path} is missing: rebuild the gazetteer (geosleuth gazetteer build)")
        return np.load(path).astype(np.int64)

    def _reverse_in_cell_order(
        self, lats: ArrayLike, lons: ArrayLike
    ) -> tuple[NDArray[Any], NDArray[np.bool_], NDArray[np.int64], NDArray[np.float64]]:
        """`_reverse_places` run in 1-degree cell order, the parts returned in the caller's order."""
        la, lo = np.asarray(lats, dtype=np.float64).ravel(), np.asarray(lons, dtype=np.float64).ravel()
        if la.size < 2:
            return self._reverse_places(la, lo)
        order = _cell_order(la, lo)
        sorted_parts = self._reverse_places(la[order], lo[order])
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        codes, on_land, chosen, dist = (part[back] for part in sorted_parts)
        return codes, on_land, chosen, dist

    def _reverse_places(
        self, la: NDArray[np.float64], lo: NDArray[np.float64]
    ) -> tuple[NDArray[Any], NDArray[np.bool_], NDArray[np.int64], NDArray[np.float64]]:
        """(country code, on land, place index or -1, chord to the place or NaN) per point."""
        ok = np.isfinite(la) & np.isfinite(lo)
        chosen_all = np.full(la.size, -1, dtype=np.int64)
        dist_all = np.full(la.size, np.nan)
        if not ok.any():
            codes, on_land = self.country_batch(la, lo)
            return codes, on_land, chosen_all, dist_all
        vectors = to_unit_vectors(la[ok], lo[ok])
        if la.size >= _OVERLAP_POINTS:  # polygons (shapely) and place trees (KD) release the GIL: overlap
            polygons = _reverse_pool().submit(self.country_batch, la, lo)
            dist, chosen = self._nearest_places(vectors)
            codes, on_land = polygons.result()
        else:
            codes, on_land = self.country_batch(la, lo)
            dist, chosen = self._nearest_places(vectors)
        wanted = codes[ok]
        # Near a border the nearest place may lie across it: look further for one in the
        # polygon's country, keeping the nearest place when none of the k is.
        chosen_cc = self._city_text_at("cc", chosen)
        retry = np.flatnonzero((chosen_cc != wanted) & (wanted != ""))
        if retry.size:
            d_k, i_k = self._sphere_query(vectors[retry], k=_RETRY_PLACES)
            effective = chord_to_km(d_k) - self._city_reach_km[i_k]
            effective[self._city_text_at("cc", i_k) != wanted[retry][:, None]] = np.inf
            pick = np.where(np.isfinite(effective).any(axis=1), effective.argmin(axis=1), 0)
            rows = np.arange(retry.size)
            chosen[retry], dist[retry] = i_k[rows, pick], d_k[rows, pick]
        chosen_all[ok], dist_all[ok] = chosen, dist
        fill = ok.copy()
        fill[ok] = wanted == ""  # territory without a code: fall back to the place's country
        codes[fill] = self._city_text_at("cc", chosen)[wanted == ""]
        return codes, on_land, chosen_all, dist_all

    def reverse(self, lat: float, lon: float) -> ReversePlace:
        """What is at one point (country, admin levels, nearest town)."""
        from geosleuth.core.countries import country_name

        r = self.reverse_batch([lat], [lon])
        code = str(r["country_code"][0]) or None
        dist = float(r["city_distance_km"][0])
        return ReversePlace(
            lat=lat, lon=lon, country_code=code, country=country_name(code) if code else None,
            admin1=str(r["admin1"][0]) or None, admin2=str(r["admin2"][0]) or None,
            city=str(r["city"][0]) or None,
            city_distance_km=None if np.isnan(dist) else round(dist, 3), on_land=bool(r["on_land"][0]),
        )  # fmt: skip

    def distance_to(self, place: Place, lat: float, lon: float) -> float:
        return float(haversine_km(place.lat, place.lon, lat, lon))


_lock = threading.Lock()
_instance: Gazetteer | None = None


def _cell_order(la: NDArray[np.float64], lo: NDArray[np.float64]) -> NDArray[np.intp]:
    """An order grouping points by 1-degree cell: a 16-bit key, so the sort is a radix sort."""
    with np.errstate(invalid="ignore"):
        y = np.clip(np.floor(la) + 90, 0, 179)
        x = np.clip(np.floor(lo) + 180, 0, 359)
    key = np.where(np.isfinite(y) & np.isfinite(x), y * 360 + x, 65535).astype(np.uint16)
    return np.argsort(key, kind="stable")


def _reverse_pool() -> ThreadPoolExecutor:
    """One worker thread, shared by every gazetteer, for the polygon half of a large reverse batch."""
    with _POOL_LOCK:
        if not _POOL:
            _POOL.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix="geosleuth-reverse"))
        return _POOL[0]


def _forget_pool_in_child() -> None:
    """A forked child has the executor but not its thread (work sent to it would wait forever),
    and may have copied the lock held: it starts both afresh."""
    global _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    _POOL.clear()


os.register_at_fork(after_in_child=_forget_pool_in_child)


_UNSET = object()
_instance_env: object = _UNSET  # the GEOSLEUTH_DATA_DIR the instance was loaded for, if by default


def get_gazetteer(data_dir: Path | None = None, progress: bool | None = None) -> Gazetteer:
    """The process-wide gazetteer, built on first use (about 30 s, once per machine).

    Once loaded this is a global read and one environment look-up: tools call it per request.
    A changed ``GEOSLEUTH_DATA_DIR`` (or an explicit ``data_dir``) loads that index instead.
    """
    global _instance, _instance_env
    env = os.environ.get("GEOSLEUTH_DATA_DIR")
    current = _instance
    if data_dir is None and current is not None and _instance_env == env:
        return current
    from geosleuth.gazetteer.build import default_data_dir, ensure_built

    with _lock:
        wanted = Path(data_dir) if data_dir else default_data_dir()
        if _instance is None or _instance.data_dir != wanted:
            _instance = Gazetteer(ensure_built(wanted, progress=progress))
            saved = (_instance.data_dir / name for name in (SAVED_TREES, SMALL_SEARCH))
            if not all(path.is_file() for path in saved):  # the build's last step, done once
                try:
                    _instance.save_trees()
                except OSError as exc:  # a read-only index still works: its trees are built per process
                    log.debug("cannot save the KD-trees beside %s: %s", _instance.data_dir, exc)
            use_saved_tables(_instance.saved_country_tables)
        _instance_env = env if data_dir is None else _UNSET
        return _instance
