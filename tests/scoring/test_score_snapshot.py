"""Speed work changes no number: every protocol on the published files and on generated rows
gives the summary, warnings and per-row records the scorer gave before it (see score_snapshot.py)."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import pytest
from score_snapshot import PROTOCOLS, SNAPSHOT, cases, snapshot_of

pytest.importorskip("scipy")


@pytest.fixture(scope="module")
def expected() -> dict[str, Any]:
    with gzip.open(SNAPSHOT, "rt", encoding="utf-8") as fh:
        return json.load(fh)  # type: ignore[no-any-return]


def _same(got: Any, want: Any, where: str) -> None:
    """Equal, with floats equal to 12 significant digits (vectorised maths may differ in the last bit)."""
    if isinstance(want, float) and isinstance(got, float):
        same = (math.isnan(got) and math.isnan(want)) or math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-12)
        assert same, f"{where}: {got!r} != {want!r}"
    elif isinstance(want, dict) and isinstance(got, dict):
        assert list(got) == list(want), f"{where}: keys {list(got)} != {list(want)}"
        for k in want:
            _same(got[k], want[k], f"{where}.{k}")
    elif isinstance(want, list) and isinstance(got, list):
        assert len(got) == len(want), f"{where}: {len(got)} items != {len(want)}"
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
    else:
        assert got == want, f"{where}: {got!r} != {want!r}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_protocol_gives_the_snapshot_numbers(
    protocol: str, expected: dict[str, Any], tmp_path: Path
) -> None:
    checked = 0
    for name, (path, by) in cases(tmp_path).items():
        key = f"{name}/{protocol}"
        got = json.loads(json.dumps(snapshot_of(path, protocol, by)))
        _same(got["summary"], expected[key]["summary"], key)
        assert got["rows_digest"] == expected[key]["rows_digest"], f"{key}: a per-row record changed"
        _same(got["row_floats"], expected[key]["row_floats"], f"{key} rows")
        checked += 1
    assert checked >= 3  # gpt5, OSV-5M and the generated rows are always there
