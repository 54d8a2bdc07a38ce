"""One bad row fails alone in `score` (issue 41, item 6 and the CSV field limit): an integer past
Python's 4,300-digit conversion limit, one past float's range, a field longer than the csv
module's default 131,072 characters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
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
    import csv

    from geosleuth.bounds.textrows import CSV_FIELD_CHARS

    before = csv.field_size_limit(CSV_FIELD_CHARS)  # the process-wide limit: a library may raise it
    try:
        _long_fields(tmp_path)
    finally:
        csv.field_size_limit(before)


def _long_fields(tmp_path: Path) -> None:
    header = "id,lat,lon,true_lat,true_lon,note\n"
    rows = [f"a,48.85,2.35,48.85,2.35,{'x' * 200_000}", "b,48.85,2.35,48.85,2.35,ok",
            f"c,48.85,2.35,48.85,2.35,{'y' * (33 * 2**20)}", "d,48.85,2.35,48.85,2.35,ok"]  # fmt: skip
    path = tmp_path / "p.csv"
    path.write_text(header + "\n".join(rows) + "\n")
    code, out, err = run(str(path), "--json")
    payload = json.loads(out)
    assert code == 0 and payload["n"] == 4 and payload["parsed"] == 3
    assert "line 4: field larger than field limit" in err + out


def test_csv_outputs_write_formula_cells_as_text(tmp_path: Path) -> None:
    """Issue 41 (low): ``=HYPERLINK(…)``, ``@…``, ``+…`` cells reached ``score --rows`` CSVs unescaped."""
    import csv

    rows = [{**GOOD, "id": '=HYPERLINK("http://127.0.0.1/x","open")'}, {**GOOD, "id": "@SUM(A1)"},
            {**GOOD, "id": "+1+2"}, {**GOOD, "id": "-33.5"}, {**GOOD, "id": "plain"}]  # fmt: skip
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, _, _ = run(str(path), "--rows", str(tmp_path / "rows.csv"), "--json")
    assert code == 0
    with (tmp_path / "rows.csv").open(newline="") as handle:
        ids = [r.get("id") or r.get("sample_id") for r in csv.DictReader(handle)]
    assert ids == ['\'=HYPERLINK("http://127.0.0.1/x","open")', "'@SUM(A1)", "'+1+2", "-33.5", "plain"]


@given(st.text(max_size=20))
def test_spreadsheet_safe_cells_never_start_a_formula(text: str) -> None:
    from geosleuth.bounds.textrows import spreadsheet_safe

    cell = spreadsheet_safe(text)
    assert cell == text or cell == "'" + text
    if cell == text and text[:1] in ("=", "+", "-", "@", "\t", "\r"):
        float(text)  # left as it was only when it is a plain number
