"""What the gazetteer build saves (KD-trees, country tables) is what a process would build:
the same trees node for node, the same answers (ties included), the same tables."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from geosleuth.gazetteer import get_gazetteer
from geosleuth.gazetteer.index import SAVED_TREES, Gazetteer

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "fixtures"
FIXTURES = SHARED / "geoclip" / "coordinates_100K.csv"


@pytest.fixture(scope="module")
def saved() -> Gazetteer:
    gazetteer = get_gazetteer()
    assert (gazetteer.data_dir / SAVED_TREES).exists(), "the build writes the trees"
    assert set(gazetteer._saved_trees) == {"sphere", "big", "latlon", "vertices", "big_near_km"}
    return gazetteer


@pytest.fixture(scope="module")
def built(saved: Gazetteer) -> Gazetteer:
    """The same index with the saved trees ignored: every tree built in this process."""
    fresh = Gazetteer(saved.data_dir)
    fresh.__dict__["_saved_trees"] = {}
    return fresh


def _points(gazetteer: Gazetteer) -> tuple[np.ndarray, np.ndarray]:
    """Random points, points on places and on vertices (exact ties), midpoints between places,
    rounded coordinates (grid lines) and the GeoCLIP gallery when the shared fixtures are there."""
    rng = np.random.default_rng(24)
    lat, lon = [rng.uniform(-90, 90, 20_000)], [rng.uniform(-180, 180, 20_000)]
    rg_lat, rg_lon = gazetteer._cities["lat"], gazetteer._cities["lon"]
    pick = rng.integers(0, rg_lat.size, 20_000)
    lat += [rg_lat[pick], (rg_lat[pick] + rg_lat[pick[::-1]]) / 2, np.round(rg_lat[pick], 1)]
    lon += [rg_lon[pick], (rg_lon[pick] + rg_lon[pick[::-1]]) / 2, np.round(rg_lon[pick], 1)]
    if FIXTURES.exists():
        data = np.loadtxt(FIXTURES, delimiter=",", skiprows=1, usecols=(0, 1), max_rows=30_000)
        lat.append(data[:, 0])
        lon.append(data[:, 1])
    return np.concatenate(lat), np.concatenate(lon)


def test_saved_trees_answer_as_built_ones(saved: Gazetteer, built: Gazetteer) -> None:
    lat, lon = _points(saved)
    mine, theirs = saved.reverse_batch(lat, lon), built.reverse_batch(lat, lon)
    for key in mine:
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)
    mine, theirs = saved.reverse_geocoder_batch(lat, lon), built.reverse_geocoder_batch(lat, lon)
    for key in mine:
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)
    np.testing.assert_array_equal(saved._big_city_near_km, built._big_city_near_km)
    for name in ("_city_tree", "_big_city_tree", "_city_degree_tree", "_vertex_tree"):
        a, b = getattr(saved, name), getattr(built, name)
        np.testing.assert_array_equal(a.indices, b.indices, err_msg=name)  # the same tree, node for node
        np.testing.assert_array_equal(a.data, b.data, err_msg=name)


def test_trees_of_another_scipy_are_rebuilt(saved: Gazetteer, tmp_path: Path) -> None:
    for item in saved.data_dir.iterdir():
        if item.is_file():
            (tmp_path / item.name).symlink_to(item)
    (tmp_path / SAVED_TREES).unlink()
    with (tmp_path / SAVED_TREES).open("wb") as fh:
        pickle.dump({"scipy": "0.0.1", "trees": {"sphere": "not a tree"}}, fh)
    other = Gazetteer(tmp_path)
    assert other._saved_trees == {}
    lat, lon = np.array([47.05, 35.01, 0.0]), np.array([8.31, 135.77, -30.0])
    mine, theirs = other.reverse_batch(lat, lon), saved.reverse_batch(lat, lon)
    np.testing.assert_array_equal(mine["city"], theirs["city"])


def test_saved_country_tables_are_the_built_ones(saved: Gazetteer, tmp_path: Path) -> None:
    from geosleuth.core import countries

    built = countries.country_tables()
    assert saved.saved_country_tables() == built
    assert countries.name_index() == built["names"]  # get_gazetteer registered the saved copy
    assert countries._sovereigns() == built["sovereigns"]
    assert countries.resolve_country("Deutschland") == "DE"
    assert "HK" in countries.country_family("CN")
    (tmp_path / "country_tables.json").write_text('{"sources": "babel-0.0", "names": {"x": "DE"}}')
    assert Gazetteer(tmp_path).saved_country_tables() is None  # another CLDR wrote it: build instead
