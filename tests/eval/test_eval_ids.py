"""One id rule: a sample id matches with or without its image file extension, through `eval`,
`score --truth` (a table or a dataset folder), `merge` and the harnesses.

The truth table has the shape of GeoEstimation's released ``meta/im2gps3k_places365.csv``
(``IMG_ID,AUTHOR,LAT,LON,S3_Label,S16_Label,S365_Label,Prob_indoor,Prob_natural,Prob_urban``),
keyed by the photo's file name; `eval` names each sample by that name without ``.jpg``. Before,
``score RUN/trajectories.jsonl --truth im2gps3k_places365.csv`` printed every metric as 0.0 and
exited 0.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from eval_data import make_image, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.ids import image_sample_id, same_sample, sample_key

runner = CliRunner()
HEADER = ["IMG_ID", "AUTHOR", "LAT", "LON", "S3_Label", "S16_Label", "S365_Label"]
HEADER += ["Prob_indoor", "Prob_natural", "Prob_urban"]
ROWS = [  # three IM2GPS3K-style rows (Flickr file names), coordinates as released: lat, lon
    ["1000269685_e60e9cdfb4_1125_78841376@N00.jpg", "78841376@N00", "32.325436", "-64.764404"],
    ["1003296563_bd4cb0a0ee_1059_12345678@N00.jpg", "12345678@N00", "48.858093", "2.294694"],
    ["1017465830_5c2a9a8a33_1390_87654321@N00.jpg", "87654321@N00", "-33.856784", "151.215297"],
]
SCENES = ["2", "12", "353", "0.27", "0.05", "0.68"]
IDS = [row[0].removesuffix(".jpg") for row in ROWS]


def _im2gps3k(folder: Path) -> Path:
    """The released table beside ``images/`` named by IMG_ID."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, row in enumerate(ROWS):
        make_image(folder / "images" / row[0], i)
    table = folder / "im2gps3k_places365.csv"
    with table.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        writer.writerows(row + SCENES for row in ROWS)
    return table


@pytest.fixture()
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An `eval` run on the table: the first answer exact, the second 1° of latitude north, the third
    fails (its agent raises)."""
    table = _im2gps3k(tmp_path / "im2gps3k")
    plan = {
        IDS[0]: {"lat": 32.325436, "lon": -64.764404},
        IDS[1]: {"lat": 49.858093, "lon": 2.294694},
        IDS[2]: {"raise": "boom"},
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    out = tmp_path / "run"
    argv = ["eval", str(table.parent), "--out", str(out), "--agent-fn", "eval_fake_agent:planned"]
    result = runner.invoke(app, [*argv, "--no-report"])
    assert result.exit_code == 0, result.output
    return out, table


def _score(*argv: str) -> tuple[int, dict, str]:
    result = runner.invoke(app, ["score", *argv, "--json"])
    stdout = result.stdout.strip().splitlines()
    payload = json.loads(stdout[-1]) if stdout and stdout[-1].startswith("{") else {}
    return result.exit_code, payload, result.output


def _expected(metrics: dict) -> None:
    # 3 samples: exact (0 km), 1° of latitude (≈ 111.2 km: 6371 km × π/180), failed (counts wrong)
    assert metrics["acc@1km"] == pytest.approx(100 / 3, abs=0.01)
    assert metrics["acc@25km"] == pytest.approx(100 / 3, abs=0.01)
    assert metrics["acc@200km"] == pytest.approx(200 / 3, abs=0.01)
    assert metrics["acc@2500km"] == pytest.approx(200 / 3, abs=0.01)


def test_eval_ids_are_the_file_names_without_extension(run: tuple[Path, Path]) -> None:
    out, _ = run
    ids = [json.loads(line)["sample_id"] for line in (out / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(IDS)


def test_score_joins_a_run_to_the_released_truth_table(run: tuple[Path, Path]) -> None:
    out, table = run
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(table))
    assert code == 0, output
    assert payload["n"] == 3
    _expected(payload["metrics"])


def test_truth_may_be_the_dataset_folder_eval_read(run: tuple[Path, Path]) -> None:
    out, table = run
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(table.parent))
    assert code == 0, output
    _expected(payload["metrics"])


def test_truth_in_another_layout_eval_reads(run: tuple[Path, Path], tmp_path: Path) -> None:
    """The OSV-5M baseline's IM2GPS ``info.json`` (file name -> list, [-4] latitude, [-3] longitude)."""
    out, _ = run
    folder = tmp_path / "info"
    folder.mkdir()
    info = {
        row[0]: [row[1], "title", f"latitude: {row[2]}", f"longitude: {row[3]}", "x", "y"] for row in ROWS
    }
    (folder / "info.json").write_text(json.dumps(info))
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(folder))
    assert code == 0, output
    _expected(payload["metrics"])


def test_truth_matching_no_prediction_is_an_error_naming_both_files(
    run: tuple[Path, Path], tmp_path: Path
) -> None:
    out, _ = run
    other = tmp_path / "other.csv"
    other.write_text("IMG_ID,AUTHOR,LAT,LON\nnot_this_one.jpg,x,1.0,2.0\n")
    predictions = out / "trajectories.jsonl"
    code, payload, output = _score(str(predictions), "--truth", str(other))
    assert code == 1 and payload == {}
    assert "matches none of the 3 prediction(s)" in output
    assert str(other) in output and str(predictions) in output


def test_partial_match_says_how_many_matched(run: tuple[Path, Path], tmp_path: Path) -> None:
    out, table = run
    two = tmp_path / "two.csv"
    two.write_text("\n".join(table.read_text().splitlines()[:3]) + "\n")  # header + 2 rows
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(two))
    assert code == 0, output
    assert any("2 of 3 prediction(s)" in w and str(two) in w for w in payload["warnings"])


def test_predictions_with_extension_meet_truth_without(tmp_path: Path) -> None:
    """The other direction: GeoEstimation-style results keyed by file name, truth by bare id."""
    predictions = tmp_path / "preds.csv"
    predictions.write_text(
        f"img_id,pred_lat,pred_lon\n{ROWS[0][0]},32.325436,-64.764404\n{ROWS[1][0]},48.858093,2.294694\n"
    )
    truth = tmp_path / "truth.jsonl"
    rows = [{"id": sid, "lat": row[2], "lon": row[3]} for sid, row in zip(IDS, ROWS, strict=True)]
    truth.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, payload, output = _score(str(predictions), "--truth", str(truth))
    assert code == 0, output
    # two exact answers of three samples (the third has no prediction and counts as wrong)
    assert payload["metrics"]["acc@1km"] == pytest.approx(200 / 3, abs=0.01)


def test_merged_shards_score_against_the_truth_table(run: tuple[Path, Path], tmp_path: Path) -> None:
    _, table = run
    sharded = tmp_path / "sharded"
    for index in range(2):
        argv = ["eval", str(table), "--out", str(sharded), "--agent-fn", "eval_fake_agent:planned"]
        result = runner.invoke(app, [*argv, "--shard", f"{index}/2", "--no-report"])
        assert result.exit_code == 0 or "all 1 sample(s) run now failed" in result.output, result.output
    merged = runner.invoke(app, ["merge", str(sharded), "--no-report"])
    assert merged.exit_code == 0, merged.output
    code, payload, output = _score(str(sharded / "trajectories.jsonl"), "--truth", str(table))
    assert code == 0, output
    _expected(payload["metrics"])


def test_the_rule() -> None:
    assert sample_key(ROWS[0][0]) == IDS[0] and sample_key(f" {IDS[0]} ") == IDS[0]
    assert sample_key("photo.JPEG") == "photo" and sample_key("photo.png") == "photo"
    assert sample_key("12.5") == "12.5" and sample_key("v1.2") == "v1.2" and sample_key(".jpg") == ".jpg"
    assert sample_key(17) == "17"
    assert image_sample_id("e4/3a/123.jpg") == "123" and image_sample_id("images/a.b.webp") == "a.b"
    assert same_sample("a.jpg", "a") and not same_sample("a.jpg", "b")


def test_harness_rows_are_found_by_either_spelling() -> None:
    from geosleuth.integrations.harness import Answered, row_result, score_answers

    truth = {"id": IDS[0], "lat": 32.325436, "lon": -64.764404}
    result = score_answers([Answered(truth, '{"lat": 32.325436, "lon": -64.764404}')], "default")
    record = row_result(result, ROWS[0][0])
    assert record["id"] == IDS[0] and record["distance_km"] == pytest.approx(0.0, abs=1e-6)


def test_eval_and_score_read_the_same_id_from_a_row() -> None:
    """One reader: named id columns before positions, then the image's file name."""
    from geosleuth.eval.datasets.formats import row_sample_id
    from geosleuth.scoring.io import row_id

    rows = [{"index": 3, "img_id": "a.jpg"}, {"image": "imgs/b.png"}, {"idx": 4, "uid": "u"}, {"ID": " c "}]
    expected = ["a", "b", "u", "c"]
    for i, (row, key) in enumerate(zip(rows, expected, strict=True)):
        assert sample_key(row_sample_id(row, i)) == sample_key(row_id(row)) == key


def test_a_truth_folder_eval_cannot_read_is_an_error(run: tuple[Path, Path], tmp_path: Path) -> None:
    out, table = run
    empty = tmp_path / "empty"
    empty.mkdir()
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(empty))
    assert code == 1 and payload == {} and f"--truth {empty}" in output


def test_bad_rows_of_a_truth_folder_are_listed(run: tuple[Path, Path]) -> None:
    out, table = run
    table.write_text(table.read_text() + "broken.jpg,x,north,3,2,12,353,0.27,0.05,0.68\n")
    code, payload, output = _score(str(out / "trajectories.jsonl"), "--truth", str(table.parent))
    assert code == 0, output
    _expected(payload["metrics"])
    assert any("broken" in w and "not a number" in w for w in payload["warnings"]), payload["warnings"]
