"""A dataset row that is not UTF-8 is one problem row; the rows around it load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geosleuth.bounds.textrows import csv_records, text_lines
from geosleuth.eval.datasets.loading import load_dataset


def _rows() -> list[dict]:
    return [
        {"id": f"s{i}", "image": f"s{i}.jpg", "lat": 1.0 + i, "lon": 2.0, "city": "Zug"} for i in range(3)
    ]


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


def test_trajectory_and_judgment_readers_skip_a_line_that_is_not_utf8(tmp_path: Path) -> None:
    from geosleuth.agent.trajectory import scan_trajectories
    from geosleuth.core.records import Trajectory
    from geosleuth.eval.judges.tasks import JUDGMENTS, read_judgments

    good = Trajectory(sample_id="a", model="m").model_dump_json().encode()
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(good + b"\n" + good.replace(b'"m"', b'"m\xff"') + b"\n" + good + b"\n")
    scanned = list(scan_trajectories(path))
    assert [i for i, r in scanned if isinstance(r, Trajectory)] == [1, 3]
    assert "trajectories.jsonl:2: not a trajectory record" in str(scanned[1][1])
    judged = [{"sample_id": s, "judge": "j", "ok": True} for s in ("a", "b", "c")]
    lines = [json.dumps(r).encode() for r in judged]
    lines[1] = lines[1].replace(b'"b"', b'"b\xff"')
    (tmp_path / JUDGMENTS).write_bytes(b"\n".join(lines) + b"\n")
    assert sorted(read_judgments(tmp_path)) == [("a", "j"), ("c", "j")]
