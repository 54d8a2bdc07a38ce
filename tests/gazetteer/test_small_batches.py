"""A small batch is searched without the KD-trees (no SciPy import, issue 24) and gets the trees'
answers exactly: the same neighbours, ties between identical points included, the same distances."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from geosleuth.core.geo import to_unit_vectors
from geosleuth.gazetteer import get_gazetteer
from geosleuth.gazetteer.index import SMALL_SEARCH, Gazetteer
from geosleuth.gazetteer.nearest import BRUTE_FORCE_POINTS, brute_nearest
from geosleuth.gazetteer.saved import tree_rank

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gazetteer() -> Gazetteer:
    gazetteer = get_gazetteer()
    assert (gazetteer.data_dir / SMALL_SEARCH).exists(), "the build saves what small batches search"
    for key in ("sphere", "big", "vertices", "sphere_points", "big_points", "vertices_points", "tile_bounds"):
        assert key in gazetteer._small_search
    return gazetteer


def _queries(points: np.ndarray, rng: np.random.Generator, n: int) -> np.ndarray:
    """Unit vectors: random, exactly on stored points (ties between identical points), and midway."""
    lat, lon = rng.uniform(-90, 90, n), rng.uniform(-180, 180, n)
    pick = rng.integers(0, len(points), (2, n))
    mid = points[pick[0]] + points[pick[1]]
    mid /= np.linalg.norm(mid, axis=1, keepdims=True)
    return np.concatenate([to_unit_vectors(lat, lon), points[pick[0]], mid])


CASES = [
    ("sphere", 1, np.inf), ("sphere", 8, np.inf), ("big", 1, 0.01), ("big", 1, np.inf),
    ("vertices", 1, np.inf),
]  # fmt: skip


@pytest.mark.parametrize(("name", "k", "bound"), CASES)
def test_brute_force_answers_as_the_tree(gazetteer: Gazetteer, name: str, k: int, bound: float) -> None:
    attribute = {"sphere": "_city_tree", "big": "_big_city_tree", "vertices": "_vertex_tree"}[name]
    tree = getattr(gazetteer, attribute)
    points, rank = gazetteer._small_search[f"{name}_points"].T, gazetteer._small_search[name]
    np.testing.assert_array_equal(points, tree.data)
    np.testing.assert_array_equal(rank, tree_rank(tree))
    queries = _queries(points, np.random.default_rng(7), 100)
    answered = 0
    for start in range(0, len(queries), BRUTE_FORCE_POINTS):
        batch = queries[start : start + BRUTE_FORCE_POINTS]
        hit = brute_nearest(points, batch, k, bound, rank=rank)
        if hit is None:
            continue
        answered += 1
        dist, index = tree.query(batch, k=k, distance_upper_bound=bound)
        np.testing.assert_array_equal(hit[1], index)
        np.testing.assert_array_equal(hit[0], dist)  # the very floats: same sums, same order
    assert answered >= (len(queries) // BRUTE_FORCE_POINTS) // 2  # ties are rare enough to matter little


def test_ties_between_identical_points_follow_the_tree() -> None:
    """Many identical points (and equidistant distinct ones): the rank picks the tree's choice,
    distinct equidistant points are left to the tree."""
    from scipy.spatial import cKDTree

    rng = np.random.default_rng(3)
    base = rng.integers(-3, 4, (400, 3)).astype(float)  # a small lattice: many duplicates and ties
    data = np.concatenate([base, base[rng.integers(0, 400, 400)]])
    tree = cKDTree(data)
    rank = tree_rank(tree)
    queries = np.concatenate([data[:200], rng.uniform(-3, 3, (200, 3))])
    resolved = 0
    for q in queries:
        hit = brute_nearest(data, q[None], 1, rank=rank)
        group = np.flatnonzero((data == data[tree.query(q)[1]]).all(axis=1))
        if hit is None:
            continue
        resolved += group.size > 1
        dist, index = tree.query(q[None], k=1)
        assert hit[1][0] == index[0]
        assert hit[0][0] == dist[0]
    assert resolved > 100  # identical points are settled without the tree
    assert brute_nearest(data, data[:1], 1, rank=None) is None  # no ranks: the tree decides


def _reverse(gazetteer: Gazetteer, lat: np.ndarray, lon: np.ndarray, brute: bool) -> dict[str, np.ndarray]:
    fresh = Gazetteer(gazetteer.data_dir)
    if not brute:  # every search goes to the trees, every name to the unpacked columns
        fresh.__dict__["_brute_left"] = -1
        assert fresh._cities is not None and fresh._tile_tree is not None
    out = fresh.reverse_batch(lat, lon)
    if brute:
        assert "_cities" not in fresh.__dict__
    return out


def test_small_reverse_batches_answer_as_the_trees(gazetteer: Gazetteer) -> None:
    rng = np.random.default_rng(11)
    rg_lat, rg_lon = gazetteer._cities["lat"], gazetteer._cities["lon"]
    for size in (1, 2, 5, 10, 20, BRUTE_FORCE_POINTS):
        pick = rng.integers(0, rg_lat.size, size)
        cases = [
            (rng.uniform(-90, 90, size), rng.uniform(-180, 180, size)),
            (rg_lat[pick], rg_lon[pick]),  # on places (identical GeoNames points)
            (np.round(rg_lat[pick], 1), np.round(rg_lon[pick], 1)),  # grid lines
            (np.round(rg_lat[pick]), np.round(rg_lon[pick])),  # cell corners (where tiles meet)
            (rg_lat[pick] + rng.normal(0, 0.05, size), rg_lon[pick] + rng.normal(0, 0.05, size)),
        ]
        for lat, lon in cases:
            mine, theirs = _reverse(gazetteer, lat, lon, True), _reverse(gazetteer, lat, lon, False)
            for key in theirs:
                np.testing.assert_array_equal(mine[key], theirs[key], err_msg=f"{key} ({size} points)")


def test_a_small_batch_imports_no_scipy_spatial(gazetteer: Gazetteer) -> None:
    code = (
        "import sys; from geosleuth.gazetteer import get_gazetteer; g = get_gazetteer();"
        "r = g.reverse_batch([48.8566, -33.87, 35.68, 12.0], [2.3522, 151.21, 139.69, -40.0]);"
        "print(list(r['country_code']), 'scipy.spatial' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split("] ")[-1].strip() == "False", out
    assert out.startswith("['FR', 'AU', 'JP', ")


def test_few_tile_hits_are_the_tile_tree_hits(gazetteer: Gazetteer) -> None:
    """Points on grid lines and cell corners (several tiles touch them): the pieces whose saved
    boxes hold a point, tested alone, are the tree's hits; a point whose hits disagree is left to it."""
    import shapely

    rng = np.random.default_rng(5)
    rg_lat, rg_lon = gazetteer._cities["lat"], gazetteer._cities["lon"]
    pick = rng.integers(0, rg_lat.size, 300)
    lat = np.concatenate([np.round(rg_lat[pick], 1), np.round(rg_lat[pick])])
    lon = np.concatenate([np.round(rg_lon[pick], 1), np.round(rg_lon[pick])])
    fresh = Gazetteer(gazetteer.data_dir)
    answered = 0
    for x, y in zip(lon, lat, strict=True):
        few = fresh._few_tile_hits(np.array([x]), np.array([y]))
        if few is None:
            continue
        answered += 1
        _, tree_hits = gazetteer._tile_tree.query(shapely.points([x], [y]), predicate="intersects")
        assert sorted(few[1]) == sorted(tree_hits)
    assert answered > 0.8 * lat.size
    assert "_tile_tree" not in fresh.__dict__


def test_small_search_of_another_scipy_is_ignored(gazetteer: Gazetteer, tmp_path: Path) -> None:
    """Another SciPy may lay its trees out otherwise: its ranks are not used, the answers stay the same."""
    import json

    for item in gazetteer.data_dir.iterdir():
        if item.is_file():
            (tmp_path / item.name).symlink_to(item)
    listing = json.loads((gazetteer.data_dir / SMALL_SEARCH).read_text(encoding="utf-8"))
    (tmp_path / SMALL_SEARCH).unlink()
    (tmp_path / SMALL_SEARCH).write_text(json.dumps(listing | {"scipy": "0.0.1"}), encoding="utf-8")
    other = Gazetteer(tmp_path)
    assert other._small_search == {}
    lat, lon = np.array([47.05, 35.01, 0.0, 40.0]), np.array([8.31, 135.77, -30.0, -74.0])
    mine, theirs = other.reverse_batch(lat, lon), gazetteer.reverse_batch(lat, lon)
    for key in theirs:
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=key)


def test_a_few_name_rows_are_the_unpacked_columns(gazetteer: Gazetteer) -> None:
    rng = np.random.default_rng(2)
    n = gazetteer._cities["lat"].size
    index = np.concatenate([[-1, 0, n - 1], rng.integers(0, n, 200)])
    fresh = Gazetteer(gazetteer.data_dir)
    for col in ("name", "admin1", "admin2", "cc"):
        few = fresh._city_text_at(col, index)
        assert list(few) == ["" if i < 0 else gazetteer._cities[col][i] for i in index], col
    assert "_cities" not in fresh.__dict__


def test_a_small_score_imports_no_scipy_spatial(gazetteer: Gazetteer, tmp_path: Path) -> None:
    """`score --protocol default` on a few rows (answers on land, at sea, on a grid line, and one
    to geocode) reverse-geocodes both points of each without SciPy's KD-trees or the tile tree."""
    import json

    answers = [(48.8566, 2.3522), (-33.87, 151.21), (12.0, -40.0), (37.0, -94.0), None]
    rows = []
    for i, answer in enumerate(answers):
        text = (
            "I think this is Cassville, Missouri."
            if answer is None
            else json.dumps({"lat": answer[0], "lon": answer[1], "city": "X", "country": "Y"})
        )
        rows.append({"id": str(i), "solution_str": text, "ground_truth": {"lat": 40.0 + i, "lon": -3.0 - i}})
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    code = (
        "import sys; from geosleuth.cli.app import main; sys.argv = ['geosleuth', 'score', sys.argv[1],"
        " '--protocol', 'default', '--format', 'json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import geosleuth.gazetteer.index as I\n"
        "print('scipy.spatial' in sys.modules, '_tile_tree' in I.get_gazetteer().__dict__, file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout)["n"] == len(answers)
    assert done.stderr.strip().splitlines()[-1] == "False False", done.stderr
