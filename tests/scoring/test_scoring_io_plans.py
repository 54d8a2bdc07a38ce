"""Field plans per key layout: the same answers as reading every key, in bounded memory."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.scoring import io as IO

KEYS = ["lat", "lon", "latitude", "longitude", "lng", "true_lat", "gt_lon", "city", "country", "state",
        "province", "region", "county", "area", "true_city", "labels", "x"]  # fmt: skip
VALUES = st.one_of(
    st.none(), st.floats(allow_nan=True), st.integers(-200, 200), st.text(max_size=4), st.booleans(),
    st.just({"city": "Paris"}), st.just([1, 2]),
)  # fmt: skip


def _coords_unplanned(data: dict[str, Any], keys: tuple[tuple[str, str], ...]) -> tuple[str, str] | None:
    """The rule as written before plans: the first complete pair, else the first partial one."""
    partial = None
    for lat_key, lon_key in keys:
        if (lat_key in data) != (lon_key in data):
            partial = partial or (lat_key, lon_key)
        elif lat_key in data:
            return (lat_key, lon_key)
    return partial


def _labels_unplanned(source: dict[str, Any]) -> dict[str, str]:
    """`_labels` before plans: every key of the record looked up in the rank table."""
    labels: dict[str, str] = {}
    nested = source.get("labels")
    if isinstance(nested, dict):
        labels.update({k: str(v) for k, v in nested.items() if v not in (None, "")})
    best: dict[str, int] = {}
    for key, value in source.items():
        hit = IO._LABEL_RANK.get(key)
        if hit is None or value is None or isinstance(value, (dict, list)):
            continue
        level, rank = hit
        if level in labels and level not in best:
            continue
        if rank < best.get(level, len(IO.LABEL_KEYS[level])):
            best[level] = rank
            labels[level] = "" if (isinstance(value, float) and value != value) else str(value)
    return labels


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=10), st.booleans())
def test_plans_give_what_reading_every_key_gives(data: dict[str, Any], nested: bool) -> None:
    if nested:
        data["labels"] = {"city": "Lyon", "admin1": None}
    for keys in (IO.PRED_COORD_KEYS, IO.TRUTH_COORD_KEYS, IO.PLAIN_COORD_KEYS, IO._NESTED_TRUTH_KEYS):
        for _ in range(2):  # planned, then from the plan
            assert IO._coord_keys(data, keys) == _coords_unplanned(data, keys)
    for _ in range(2):
        got = IO._labels(data)
        want = _labels_unplanned(data)
        assert got == want and list(got) == list(want)  # same labels, in the same order


def test_hostile_layouts_do_not_grow_the_plans_without_bound() -> None:
    for i in range(IO._SHAPES_CACHED + 500):
        IO._coord_keys({f"k{i}": 1, "lat": 2.0}, IO.PRED_COORD_KEYS)
        IO._labels({f"k{i}": 1, "city": "Paris"})
    assert len(IO._COORD_PLANS) <= IO._SHAPES_CACHED and len(IO._LABEL_PLANS) <= IO._SHAPES_CACHED
    IO._COORD_PLANS.clear()
    IO._LABEL_PLANS.clear()
    long_key = "x" * 100_000
    assert IO._coord_keys({long_key: 1, "pred_lat": 1.0, "pred_lon": 2.0}, IO.PRED_COORD_KEYS) == (
        "pred_lat",
        "pred_lon",
    )
    assert IO._labels({long_key: 1, "country": "France"}) == {"country": "France"}
    assert not IO._COORD_PLANS and not IO._LABEL_PLANS  # long key names are planned, never kept
