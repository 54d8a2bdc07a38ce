"""Dataset loaders and up-front validation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from eval_data import PLACES, make_csv_dataset, make_image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.datasets.loading import DatasetError, detect_format, load_dataset


def _write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def test_generic_folder_with_csv(tmp_path: Path) -> None:
    ds = load_dataset(make_csv_dataset(tmp_path / "bench"))
    assert ds.format == "generic"
    assert [s.id for s in ds.samples] == [p[0] for p in PLACES]
    first = ds.samples[0]
    assert (first.lat, first.lon) == (48.8566, 2.3522)
    assert first.labels == {"country": "France", "city": "Paris"}
    assert Path(first.image).is_file()
    assert first.metadata["difficulty"] == "easy"
    assert ds.problems == []


def test_jsonl_rows_with_nested_labels_and_bad_lines(tmp_path: Path) -> None:
    make_image(tmp_path / "a.jpg", 1)
    lines = [
        json.dumps(
            {"id": "a", "image": "a.jpg", "latitude": 10, "longitude": 20, "labels": {"country": "FR"}}
        ),
        "{not json",
        json.dumps({"id": "b", "image": "missing.jpg", "lat": 1, "lon": 2}),
        json.dumps({"id": "c", "image": "a.jpg", "lat": 95, "lon": 2}),
        json.dumps({"id": "a", "image": "a.jpg", "lat": 1, "lon": 2}),
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    ds = load_dataset(tmp_path / "d.jsonl")
    assert [s.id for s in ds.samples] == ["a", "b"]  # a missing image is recorded failed at run time
    problems = [str(p) for p in ds.problems]
    assert any("row 2" in p and "line 2 is not JSON" in p for p in problems)
    assert [str(p) for p in ds.missing_images] == [
        f"row 3 (id b): image not found: {tmp_path / 'missing.jpg'}"
    ]
    assert any("id c" in p and "latitude 95.0 outside" in p for p in problems)
    assert any("duplicate id" in p for p in problems)


def test_non_numeric_coordinate_is_a_problem(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "x.jpg", 2)
    _write_csv(tmp_path / "t.csv", ["id", "image", "lat", "lon"], [["x", "x.jpg", "north", "3"]])
    ds = load_dataset(tmp_path / "t.csv")
    assert ds.samples == []
    assert "latitude 'north' is not a number" in str(ds.problems[0])


def test_im2gps_layout(tmp_path: Path) -> None:
    make_image(tmp_path / "img" / "123_abc.jpg", 3)
    table = _write_csv(
        tmp_path / "im2gps3k_places365.csv",
        ["IMG_ID", "AUTHOR", "LAT", "LON", "S3_Label"],
        [["123_abc.jpg", "someone", "41.9", "12.5", "1"]],
    )
    assert detect_format(table) == "im2gps3k"
    ds = load_dataset(table, images=tmp_path / "img")
    (sample,) = ds.samples
    assert sample.id == "123_abc" and sample.image.endswith("123_abc.jpg")
    assert (sample.lat, sample.lon) == (41.9, 12.5)
    assert sample.metadata == {"S3_Label": "1"}


def test_osv5m_csv_finds_images_in_subfolders(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "test" / "00" / "777.jpg", 4)
    _write_csv(
        tmp_path / "test.csv",
        ["id", "latitude", "longitude", "country", "region", "sub-region", "city", "land_cover"],
        [["777", "45.1", "5.7", "FR", "Auvergne-Rhône-Alpes", "Isère", "Grenoble", "3"]],
    )
    ds = load_dataset(tmp_path / "test.csv")
    assert ds.format == "osv5m"
    (sample,) = ds.samples
    assert sample.labels == {
        "country": "FR",
        "admin1": "Auvergne-Rhône-Alpes",
        "admin2": "Isère",
        "city": "Grenoble",
    }
    assert sample.image.endswith("777.jpg") and sample.metadata["land_cover"] == "3"


def test_geobench_rows_with_metadata_json(tmp_path: Path) -> None:
    make_image(tmp_path / "p.jpg", 5)
    meta = {
        "location": {"lat": 31.2, "lon": 121.5},
        "country": "China",
        "province_or_state": "Shanghai",
        "city": "Shanghai",
        "data_type": "panorama",
    }
    (tmp_path / "g.jsonl").write_text(
        json.dumps({"id": "g1", "image": "p.jpg", "metadata": json.dumps(meta)}) + "\n"
    )
    ds = load_dataset(tmp_path / "g.jsonl", format="geobench")
    (sample,) = ds.samples
    assert (sample.lat, sample.lon) == (31.2, 121.5)
    assert sample.labels == {"country": "China", "admin1": "Shanghai", "city": "Shanghai"}
    assert sample.metadata == {"data_type": "panorama"}


def test_map_bench_rows(tmp_path: Path) -> None:
    make_image(tmp_path / "m.jpg", 6)
    row = {"image": "m.jpg", "latitude": 30.389, "longitude": -87.683, "city": "Foley", "country": "USA"}
    (tmp_path / "m.json").write_text(json.dumps([row]))
    (sample,) = load_dataset(tmp_path / "m.json", format="mapbench").samples
    assert sample.id == "m" and sample.labels == {"city": "Foley", "country": "USA"}


def test_where_country_is_shuffled_reproducibly(tmp_path: Path) -> None:
    rows = []
    for i in range(12):
        make_image(tmp_path / f"w{i}.jpg", i)
        rows.append(
            {
                "id": f"w{i}",
                "image": f"w{i}.jpg",
                "nation": "Kenya",
                "distractors": ["Uganda", "Tanzania", "Ethiopia"],
            }
        )
    (tmp_path / "wc.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    first = load_dataset(tmp_path / "wc.jsonl", seed=7).samples
    again = load_dataset(tmp_path / "wc.jsonl", seed=7).samples
    assert [s.choices for s in first] == [s.choices for s in again]
    for s in first:
        assert s.answer_type == "choice" and sorted(s.choices) == ["Ethiopia", "Kenya", "Tanzania", "Uganda"]
        assert s.choices["ABCD".index(s.answer)] == "Kenya"
    assert len({s.answer for s in first}) > 1  # the correct letter moves around
    other = load_dataset(tmp_path / "wc.jsonl", seed=8).samples
    assert [s.choices for s in other] != [s.choices for s in first]


def test_where_country_needs_three_distractors(tmp_path: Path) -> None:
    make_image(tmp_path / "w.jpg", 1)
    row = {"id": "w", "image": "w.jpg", "nation": "Kenya", "distractors": ["Uganda"]}
    (tmp_path / "wc.jsonl").write_text(json.dumps(row))
    ds = load_dataset(tmp_path / "wc.jsonl", format="wherecountry")
    assert ds.samples == [] and "expected 3 distractors" in str(ds.problems[0])


def test_where_street_level_and_coordinate_items(tmp_path: Path) -> None:
    make_image(tmp_path / "s.jpg", 2)
    rows = [
        {
            "id": "s1",
            "image": "s.jpg",
            "level": "city",
            "answer": "Kyoto",
            "country": "Japan",
            "admin1": "Kyoto",
            "hint": "Japan",
            "hint_level": "country",
            "key_clues": ["temple", "kanji sign"],
            "shapley": {"temple": 0.7, "kanji sign": 0.3},
        },
        {
            "id": "s2",
            "image": "s.jpg",
            "level": "coordinates",
            "lat": 35.0,
            "lon": 135.7,
            "key_clues": "a|b",
            "clue_weights": "0.5|0.5",
        },
        {"id": "s3", "image": "s.jpg", "level": "village", "answer": "x"},
    ]
    (tmp_path / "ws.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    ds = load_dataset(tmp_path / "ws.jsonl", format="wherestreet")
    s1, s2 = ds.samples
    assert s1.answer_type == "level" and s1.answer_level == "city" and s1.labels["city"] == "Kyoto"
    assert s1.hint_level == "country" and s1.clue_weights == [0.7, 0.3]
    assert s2.answer_type == "coordinates" and s2.key_clues == ["a", "b"] and s2.clue_weights == [0.5, 0.5]
    assert "answer level 'village'" in str(ds.problems[0])


def test_fingerprint_tracks_content(tmp_path: Path) -> None:
    folder = make_csv_dataset(tmp_path / "b")
    before = load_dataset(folder).fingerprint
    assert before == load_dataset(folder).fingerprint
    text = (folder / "data.csv").read_text().replace("48.8566", "48.8567")
    (folder / "data.csv").write_text(text)
    assert load_dataset(folder).fingerprint != before


def test_missing_and_unknown_inputs(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="not found"):
        load_dataset(tmp_path / "nope.csv")
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(DatasetError, match="unsupported file type"):
        load_dataset(tmp_path / "x.txt", format="generic")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load_dataset(tmp_path / "x.txt", format="bogus")


def test_cli_validate(tmp_path: Path) -> None:
    folder = make_csv_dataset(tmp_path / "b")
    runner = CliRunner()
    ok = runner.invoke(app, ["datasets", "validate", str(folder)])
    assert ok.exit_code == 0, ok.output
    assert "8 valid sample(s), 0 problem(s)" in ok.output
    (folder / "images" / "tokyo.jpg").unlink()
    bad = runner.invoke(app, ["datasets", "validate", str(folder)])
    assert bad.exit_code == 1 and "id tokyo" in bad.output and "image not found" in bad.output
    missing = runner.invoke(app, ["datasets", "validate", str(tmp_path / "none")])
    assert missing.exit_code == 2 and "dataset not found" in missing.output
