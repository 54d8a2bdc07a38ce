"""A dataset row that is not UTF-8 is one problem row; the rows around it load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geosleuth.eval.datasets import load_dataset
from geosleuth.textrows import csv_records, text_lines


def _rows() -> list[dict]:
    return [{"id": f"s{i}", "image": f"s{i}.jpg", "lat": 1.0 + i, "lon": 2.0, "city": "Zug"} for i in range(3)]


def test_a_jsonl_dataset_keeps_the_rows_around_a_bad_byte(tmp_path: Path) -> None:
    lines = [json.dumps(r).encode() for r in _rows()]
    lines[1] = lines[1].replace(b"Zug", b"Z\xfcrich")  # Latin-1 ü
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    data = load_dataset(path, check_images=False)
    assert [s.id for s in data.samples] == ["s0", "s2"]
    (problem,) = data.problems
    assert "line 2 is not UTF-8 text" in problem.problem


def test_a_csv_dataset_keeps_the_rows_around_a_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    body = [b"id,image,lat,lon,city"] + [f"s{i},s{i}.jpg,{1.0 + i},2.0,Zug".encode() for i in range(3)]
    body[3] = body[3].replace(b"Zug", b"Z\xfcrich")
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(body) + b"\r\n")
    data = load_dataset(path, check_images=False)
    assert [s.id for s in data.samples] == ["s0", "s1"]
    (problem,) = data.problems
    assert "line 4 is not UTF-8 text" in problem.problem


def test_row_readers_number_lines_and_skip_the_bom(tmp_path: Path) -> None:
    path = tmp_path / "t.txt"
    path.write_bytes(b"\xef\xbb\xbfa\n\xff\nc\n")
    assert list(text_lines(path)) == [
        (1, "a\n", None),
        (2, None, "line 2 is not UTF-8 text (invalid start byte at byte 0)"),
        (3, "c\n", None),
    ]
    bad_header = tmp_path / "h.csv"
    bad_header.write_bytes(b"a,\xff\n1,2\n")
    with pytest.raises(ValueError, match="header row is not UTF-8"):
        list(csv_records(bad_header))
