"""Training data is as leak-proof as evaluation (issue 42): `data synthesize` puts no EXIF into a
trajectory, `export-verl` embeds the pixels without the file's metadata, and the exports and
synthesis warn, or refuse with --strict, when a frozen benchmark's images are in the data."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.bounds.imagemeta import metadata_kinds
from geosleuth.cli.app import app
from geosleuth.testing.fake_openai import FakeOpenAIServer, reply, tool_call
from geosleuth.testing.leaky import CAPTION, leaky_benchmark


def test_synthesis_with_the_offline_observer_reads_no_exif(tmp_path: Path) -> None:
    bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
    planner = [
        reply("Find the tower.", tool_calls=[tool_call("geocode", {"address": "lattice tower"}, "c1")]),
        reply(json.dumps({"lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"})),
    ]
    with FakeOpenAIServer(planner) as plan:
        done = CliRunner().invoke(
            app,
            ["data", "synthesize", str(bench.folder), "-o", str(tmp_path / "out"), "--observer", "offline",
             "--planner-model", "plan", "--planner-url", plan.base_url, "--tools", "geocode",
             "--registry-factory", "test_training_synthesis:registry"],
        )  # fmt: skip
        bodies = [r.body.decode() for r in plan.chat_requests]
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["kept"] == 1
    kept = (tmp_path / "out" / "trajectories.jsonl").read_text()
    for text in [kept, *bodies]:
        assert "GPS" not in text and "EXIF" not in text and CAPTION not in text
    assert bodies and not [b for b in bodies if "2940211474" in b]  # the record keeps the path; no request


def test_export_verl_embeds_pixels_without_metadata(tmp_path: Path) -> None:
    bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
    out = tmp_path / "train.parquet"
    done = CliRunner().invoke(
        app, ["data", "export-verl", str(bench.folder), "--out", str(out), "--tools", ""]
    )
    assert done.exit_code == 0, done.output
    (row,) = pq.read_table(out).to_pylist()
    embedded = row["images"][0]["bytes"]
    copy = tmp_path / "embedded.jpg"
    copy.write_bytes(embedded)
    assert metadata_kinds(bench.image) == ["caption", "comment", "gps"] and metadata_kinds(copy) == []
    with Image.open(io.BytesIO(embedded)) as got, Image.open(bench.image) as original:
        assert len(got.getexif()) == 0 and got.tobytes() == original.tobytes()  # same pixels, bit for bit


@pytest.mark.parametrize("command", ["export-verl", "export-swift", "synthesize"])
def test_benchmark_images_in_training_data_warn_or_refuse(tmp_path: Path, command: str) -> None:
    bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
    manifest = tmp_path / "frozen.json"
    runner = CliRunner()
    assert (
        runner.invoke(app, ["datasets", "freeze", str(bench.folder), "--out", str(manifest)]).exit_code == 0
    )
    args = ["data", command, str(bench.folder), "--out", str(tmp_path / "o" / "x.out")]
    if command == "synthesize":
        args += ["--observer", "offline", "--planner-model", "p", "--planner-url", "http://127.0.0.1:9/v1"]
    else:
        args += ["--tools", ""]
    refused = runner.invoke(app, [*args, "--benchmark-manifest", str(manifest), "--strict"])
    assert refused.exit_code == 1
    assert "1 training sample(s) are benchmark images: eiffel-0042 (= bench:eiffel-0042)" in refused.output
    if command != "synthesize":  # (synthesis would go on to ask the planner)
        warned = runner.invoke(app, [*args, "--benchmark-manifest", str(manifest)])
        assert warned.exit_code == 0, warned.output
        assert "warning: 1 training sample(s) are benchmark images" in warned.output
