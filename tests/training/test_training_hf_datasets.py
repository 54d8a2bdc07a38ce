"""Hugging Face datasets load in eval and in every training export: a ``save_to_disk`` folder
given by a relative path keeps its images, and parquet whose ``datasets.Image`` column holds
``{"bytes": null, "path": …}`` (images by reference) is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.datasets.loading import load_dataset

runner = CliRunner()
POINTS = [("a", 48.85, 2.35), ("b", 35.68, 139.69)]


@pytest.fixture
def saved_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict(
        {
            "id": [p[0] for p in POINTS],
            "image": [Image.new("RGB", (64 + i, 48), (i * 90, 20, 30)) for i in range(len(POINTS))],
            "lat": [p[1] for p in POINTS],
            "lon": [p[2] for p in POINTS],
            "country": ["France", "Japan"],
        }
    ).cast_column("image", datasets.Image())
    ds.save_to_disk(str(tmp_path / "saved"))
    monkeypatch.chdir(tmp_path)
    return Path("saved")  # relative, as a user types it


@pytest.fixture
def parquet_by_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    (tmp_path / "data" / "imgs").mkdir(parents=True)
    for i in range(len(POINTS)):
        # file names unlike the ids, so only the struct's path can find them
        Image.new("RGB", (80, 60 + i), (5, i * 90, 7)).save(tmp_path / "data" / "imgs" / f"photo_{i}.jpg")
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "id": [p[0] for p in POINTS],
            "image": pa.array(
                [{"bytes": None, "path": f"imgs/photo_{i}.jpg"} for i in range(len(POINTS))], type=image_type
            ),
            "lat": [p[1] for p in POINTS],
            "lon": [p[2] for p in POINTS],
            "country": ["France", "Japan"],
        }
    )
    pq.write_table(table, tmp_path / "data" / "test.parquet")
    monkeypatch.chdir(tmp_path)
    return Path("data") / "test.parquet"


@pytest.mark.parametrize("fixture", ["saved_dataset", "parquet_by_reference"])
def test_eval_loader_finds_every_image(fixture: str, request: pytest.FixtureRequest) -> None:
    source: Path = request.getfixturevalue(fixture)
    ds = load_dataset(source, "auto", None, seed=0)  # as `geosleuth eval` loads it
    assert not ds.problems and not ds.missing_images
    assert [s.id for s in ds.samples] == ["a", "b"]
    for sample in ds.samples:
        assert Path(sample.image).is_absolute() and Image.open(sample.image).size[0] >= 64
    res = runner.invoke(app, ["datasets", "validate", str(source)])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize("fixture", ["saved_dataset", "parquet_by_reference"])
def test_every_export_reads_it(fixture: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    source: Path = request.getfixturevalue(fixture)
    exports = [
        (
            ["export-verl", str(source), "-o", "out/t.parquet", "--tools", "image_zoom_in_tool"],
            "wrote 2 rows",
        ),
        (["export-swift", str(source), "-o", "out/s.jsonl", "--tools", "image_zoom_in_tool"], "wrote 2 rows"),
        (["sample", str(source), "--size", "2", "--seed", "0", "-o", "out/sampled.jsonl"], '"written": 2'),
        (["build-mcq", str(source), "-o", "out/mcq.jsonl", "--seed", "0"], "wrote 2 questions"),
    ]
    for argv, wrote in exports:
        res = runner.invoke(app, ["data", *argv])
        assert res.exit_code == 0 and wrote in res.output and "skipped " not in res.output, (
            argv[0],
            res.output,
        )
    rows = [json.loads(line) for line in Path("out/s.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(Path(r["images"][0]).is_file() for r in rows)
    import pyarrow.parquet as pq

    verl_rows = pq.read_table("out/t.parquet").to_pylist()
    assert len(verl_rows) == 2
    create = verl_rows[0]["extra_info"]["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]
    assert Path(create["image"]).is_file()
