"""Frozen benchmarks (issue 42): image hashes in run.json, `datasets freeze` + `eval --manifest`,
`compare`, `arena` and `merge` refusing runs made on other image files, `datasets overlap`."""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from eval_data import make_csv_dataset
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.datasets.frozen import FrozenMismatch, image_conflicts, require_same_images


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _repaint(path: Path) -> None:
    """Other pixels in a file of the same size (one quantisation step changed): the dataset
    fingerprint (ids, truth, file sizes) cannot tell, the image hash can."""
    data = bytearray(path.read_bytes())
    at = data.index(b"\xff\xdb") + 5  # the first value of the first quantisation table
    data[at] = data[at] + 1 if data[at] < 255 else 254
    path.write_bytes(bytes(data))


@pytest.fixture
def offline(tmp_path: Path) -> Path:
    config = tmp_path / "offline.yaml"
    config.write_text("agent: {offline_use_ocr: false}\n")
    return config


def _eval(data: Path, out: Path, config: Path, *flags: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, ["eval", str(data), "--out", str(out), "--config", str(config), *flags])


def test_freeze_then_eval_with_the_manifest(tmp_path: Path, offline: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    manifest = tmp_path / "bench.frozen.json"
    runner = CliRunner()
    frozen = runner.invoke(app, ["datasets", "freeze", str(data), "--out", str(manifest)])
    assert frozen.exit_code == 0, frozen.output
    written = json.loads(manifest.read_text())
    assert {r["id"]: r["sha256"] for r in written["samples"]} == {
        p.stem: _sha(p) for p in (data / "images").glob("*.jpg")
    }
    assert "48.8566" not in manifest.read_text() and len(written["truth_sha256"]) == 64  # truth hashed only
    ok = _eval(data, tmp_path / "run", offline, "--manifest", str(manifest))
    assert ok.exit_code == 0, ok.output
    run = json.loads((tmp_path / "run" / "run.json").read_text())
    assert run["dataset"]["image_sha256"]["paris"] == _sha(data / "images" / "paris.jpg")

    _repaint(data / "images" / "tokyo.jpg")
    changed = _eval(data, tmp_path / "run2", offline, "--manifest", str(manifest))
    assert changed.exit_code == 2 and "1 image(s) differ from the manifest: tokyo" in changed.output

    shutil.copy(tmp_path / "bench" / "images" / "paris.jpg", tmp_path / "bench" / "images" / "tokyo.jpg")
    retruthed = make_csv_dataset(tmp_path / "bench2")
    table = retruthed / "data.csv"
    rows = list(csv.reader(table.open()))
    rows[1][2] = "48.9"  # paris moved
    with table.open("w", newline="") as handle:
        csv.writer(handle).writerows(rows)
    edited = _eval(retruthed, tmp_path / "run3", offline, "--manifest", str(manifest))
    assert edited.exit_code == 2 and "ground truth differs" in edited.output


def test_resume_and_compare_refuse_other_image_files(tmp_path: Path, offline: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    copy = tmp_path / "copy"
    shutil.copytree(data, copy)
    _repaint(copy / "images" / "cairo.jpg")
    for source, out in ((data, "a"), (data, "b"), (copy, "c")):
        assert _eval(source, tmp_path / out, offline).exit_code == 0
    runner = CliRunner()
    same = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "b")])
    assert same.exit_code == 0, same.output
    other = runner.invoke(app, ["compare", str(tmp_path / "a"), str(tmp_path / "c")])
    assert other.exit_code == 2 and "different image files for 1 sample(s): cairo" in other.output
    paired = runner.invoke(app, ["arena", str(tmp_path / "a"), str(tmp_path / "b"), "--rounds", "10"])
    assert paired.exit_code == 0, paired.output
    refused = runner.invoke(app, ["arena", str(tmp_path / "a"), str(tmp_path / "c"), "--rounds", "10"])
    assert refused.exit_code == 2 and "different image files for 1 sample(s): cairo" in refused.output
    resumed = _eval(copy, tmp_path / "a", offline)
    assert resumed.exit_code == 2 and "other image files for 1 sample(s): cairo" in resumed.output


def test_merge_refuses_a_shard_rerun_on_other_images(tmp_path: Path, offline: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    run = tmp_path / "run"
    for shard in ("0/2", "1/2"):
        assert _eval(data, run, offline, "--shard", shard).exit_code == 0
    runner = CliRunner()
    merged = runner.invoke(app, ["merge", str(run), "--no-report"])
    assert merged.exit_code == 0, merged.output
    hashes = json.loads((run / "run.json").read_text())["dataset"]["image_sha256"]
    assert hashes == {p.stem: _sha(p) for p in (data / "images").glob("*.jpg")}
    shard0 = json.loads((run / "shards" / "0-of-2" / "samples.jsonl").read_text().splitlines()[0])["id"]
    shutil.rmtree(run / "shards" / "0-of-2")
    _repaint(data / "images" / f"{shard0}.jpg")
    assert _eval(data, run, offline, "--shard", "0/2").exit_code == 0
    again = runner.invoke(app, ["merge", str(run), "--no-report"])
    assert again.exit_code == 2 and f"for 1 sample(s): {shard0} (the earlier merge" in again.output


def test_require_same_images_names_every_clash() -> None:
    """The check `arena` calls: a run without hashes (made before) passes; clashes are named."""
    a = {"dataset": {"image_sha256": {"x": "1", "y": "2"}}}
    b = {"dataset": {"image_sha256": {"x": "1", "y": "3", "z": "9"}}}
    require_same_images([("old", {"dataset": {}}), ("a", a)])
    require_same_images([("a", a), ("b", b)], ids={"x"})
    with pytest.raises(FrozenMismatch, match=r"1 sample\(s\): y \(a vs b\)"):
        require_same_images([("old", {}), ("a", a), ("b", b)])
    assert image_conflicts({"x": "1", "y": "2"}, {"x": "1"}, missing_differs=True) == ["y"]


def test_overlap_by_id_image_and_place(tmp_path: Path) -> None:
    train = make_csv_dataset(tmp_path / "train")
    bench = tmp_path / "bench"
    (bench / "images").mkdir(parents=True)
    shutil.copy(train / "images" / "paris.jpg", bench / "images" / "renamed.jpg")  # same file, new id
    Image.new("RGB", (64, 48), (9, 9, 9)).save(bench / "images" / "berlin2.jpg")  # same place and size
    Image.new("RGB", (32, 32), (9, 9, 9)).save(bench / "images" / "tokyo.jpg")  # same id only
    (bench / "data.csv").write_text(
        "id,image,lat,lon\n"
        "renamed,renamed.jpg,10.0,10.0\n"
        "berlin2,berlin2.jpg,52.52005,13.40505\n"  # about 6.6 m from berlin (52.52, 13.405)
        "tokyo,tokyo.jpg,0.0,0.0\n"
    )
    result = CliRunner().invoke(app, ["datasets", "overlap", str(train), str(bench), "--json"])
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert found["by_id"] == ["tokyo"]
    assert found["by_image"] == [["paris", "renamed"]]
    assert found["by_place"] == [["berlin", "berlin2"]]
    strict = CliRunner().invoke(app, ["datasets", "overlap", str(train), str(bench), "--strict"])
    assert strict.exit_code == 1 and "same image file: 1 (paris=renamed)" in strict.output
