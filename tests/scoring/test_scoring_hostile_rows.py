"""One bad row fails alone in `score` (issue 41, item 6 and the CSV field limit): an integer past
Python's 4,300-digit conversion limit, one past float's range, a field longer than the csv
module's default 131,072 characters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_scoring_cli import run

GOOD = {"id": "b", "lat": 48.85, "lon": 2.35, "true_lat": 48.85, "true_lon": 2.35}


@pytest.mark.parametrize("digits", [4_000, 5_000])
@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_huge_integer_is_one_failed_row(tmp_path: Path, digits: int, suffix: str) -> None:
    bad = '{"id": "a", "lat": ' + "1" * digits + ', "lon": 2, "true_lat": 1, "true_lon": 2}'
    text = bad + "\n" + json.dumps(GOOD) + "\n" if suffix == ".jsonl" else f"[{bad}, {json.dumps(GOOD)}]"
    path = tmp_path / f"p{suffix}"
    path.write_text(text)
    code, out, _ = run(str(path), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["n"] == 2 and payload["parsed"] == 1
    assert payload["metrics"]["acc@1km"] == 50.0  # b exact, a failed: 1 of 2


def test_a_csv_field_past_the_default_limit_is_read_and_one_past_ours_fails_alone(tmp_path: Path) -> None:
    header = "id,lat,lon,true_lat,true_lon,note\n"
    rows = [f"a,48.85,2.35,48.85,2.35,{'x' * 200_000}", "b,48.85,2.35,48.85,2.35,ok",
            f"c,48.85,2.35,48.85,2.35,{'y' * (33 * 2**20)}", "d,48.85,2.35,48.85,2.35,ok"]  # fmt: skip
    path = tmp_path / "p.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    code, out, err = run(str(path), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["n"] == 4 and payload["parsed"] == 3
    assert "line 4: field larger than field limit" in err + out
