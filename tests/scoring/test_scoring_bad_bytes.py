"""A bad row stays one row: bytes that are not UTF-8 fail the row that holds them, not the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.scoring import get_protocol, score_file

ANSWER = '{"lat": 10.0, "lon": 10.0, "city": "X", "country": "Y"}'


def row(i: int, text: str = ANSWER) -> dict:
    return {"index": i, "ground_truth": {"lat": 10.0, "lon": 10.0}, "solution_str": text, "note": "ok"}


def jsonl_with_raw_ff(path: Path) -> Path:
    lines = [json.dumps(row(i), ensure_ascii=False).encode() for i in range(3)]
    lines[1] = lines[1].replace(b'"ok"', b'"o\xffk"')  # one raw 0xff byte in row 2
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")  # with a BOM, as Excel writes
    return path


def test_one_raw_ff_byte_in_one_jsonl_row_is_one_failed_row(tmp_path: Path) -> None:
    result = score_file(jsonl_with_raw_ff(tmp_path / "p.jsonl"), get_protocol("twm"))
    assert result.score.n == 3 and result.score.metrics["acc@0.5km"] == pytest.approx(200 / 3)
    assert any("p.jsonl:2: not UTF-8 text (invalid start byte" in w for w in result.score.warnings)


def test_score_cli_scores_the_file_around_the_bad_row(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["score", str(jsonl_with_raw_ff(tmp_path / "p.jsonl")), "-f", "json"])
    assert out.exit_code == 0, out.output
    payload = json.loads(out.stdout)
    assert payload["n"] == 3 and payload["metrics"]["acc@0.5km"] == pytest.approx(66.67)


def test_one_bad_csv_row_is_one_failed_row(tmp_path: Path) -> None:
    path = tmp_path / "p.csv"
    rows = [b"id,pred_lat,pred_lon,true_lat,true_lon,note"]
    rows += [f"{i},10.0,10.0,10.0,10.0,fine".encode() for i in range(3)]
    rows[2] = b'1,10.0,10.0,10.0,10.0,"caf\xe9\nsecond line"'  # Latin-1 é inside a quoted multi-line field
    path.write_bytes(b"\n".join(rows) + b"\n")
    result = score_file(path, get_protocol("default"))
    assert result.score.n == 3 and result.score.metrics["acc@1km"] == pytest.approx(200 / 3)
    assert any("p.csv:4: not UTF-8 text" in w for w in result.score.warnings)


def test_one_bad_item_of_a_json_array_is_one_failed_row(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    text = json.dumps([row(0), row(1), row(2)], ensure_ascii=False).encode()
    head, tail = text.split(b'"index": 2', 1)
    path.write_bytes(head + b'"index": 2' + tail.replace(b'"ok"', b'"o\xffk"', 1))
    result = score_file(path, get_protocol("twm"))
    assert result.score.n == 3 and result.score.metrics["acc@0.5km"] == pytest.approx(200 / 3)
    assert any("p.json:item 3: not UTF-8 text (byte 0xff" in w for w in result.score.warnings)
