"""`geosleuth locate` and the offline clue pipeline: EXIF, the bundled sign, blank images, bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

from agent_helpers import bomb_png
from PIL import Image
from typer.testing import CliRunner

from geosleuth.agent import read_trajectories
from geosleuth.cli.app import app
from geosleuth.core.geo import haversine_km
from geosleuth.testing import FakeOpenAIServer, reply

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"
LUZERN = (47.0502, 8.3093)
runner = CliRunner()


def gps_jpeg(path: Path, lat_dms: tuple[float, float, float], lon_dms: tuple[float, float, float]) -> Path:
    img = Image.new("RGB", (320, 240), "white")
    exif = img.getexif()
    exif.get_ifd(0x8825).update({1: "N", 2: lat_dms, 3: "E", 4: lon_dms})
    img.save(path, exif=exif)
    return path


def test_exif_gps_wins_with_exactly_those_coordinates(tmp_path: Path) -> None:
    image = gps_jpeg(tmp_path / "gps.jpg", (47.0, 3.0, 0.0), (8.0, 18.0, 36.0))
    result = runner.invoke(app, ["locate", str(image), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    pred = row["prediction"]
    assert (pred["lat"], pred["lon"]) == (47.05, 8.31)
    assert pred["coords_source"] == "exif" and "EXIF GPS" in pred["evidence"][0]
    assert row["status"] == "ok" and row["model"] == "offline-clues"


def test_blank_image_cannot_be_located_and_exits_zero(tmp_path: Path) -> None:
    blank = tmp_path / "blank.png"
    Image.new("RGB", (640, 480), "white").save(blank)
    result = runner.invoke(app, ["locate", str(blank), "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    assert row["status"] == "no_evidence" and row["prediction"] is None and "cannot locate" in row["error"]
    text = runner.invoke(app, ["locate", str(blank)])
    assert text.exit_code == 0 and "cannot locate" in text.output


def test_bundled_sign_lands_within_25_km(tmp_path: Path) -> None:
    result = runner.invoke(app, ["locate", str(EXAMPLE), "--json", "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.output)
    pred = row["prediction"]
    assert row["status"] == "ok" and pred["country_code"] == "CH"
    assert float(haversine_km(pred["lat"], pred["lon"], *LUZERN)) < 25
    assert 0 < pred["confidence"] <= 1 and pred["radius_km"] > 0
    assert any("+41 41" in e for e in pred["evidence"])
    (traj,) = read_trajectories(tmp_path / "out" / "trajectories.jsonl")
    assert {c.name for c in traj.tool_calls} >= {"exif_gps", "ocr", "phone_area", "place_names"}
    assert all(c.result_text for c in traj.tool_calls if c.name in {"gazetteer", "ocr", "candidates"})


def test_bad_inputs_fail_per_image_and_the_others_still_run(tmp_path: Path) -> None:
    good = gps_jpeg(tmp_path / "good.jpg", (52.0, 31.0, 12.0), (13.0, 24.0, 18.0))
    zero = tmp_path / "zero.jpg"
    zero.write_bytes(b"")
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(good.read_bytes()[:200])
    text_file = tmp_path / "notes.txt"
    text_file.write_text("not an image")
    bomb = bomb_png(tmp_path / "bomb.png")
    bad = [tmp_path / "missing.jpg", zero, truncated, bomb, text_file]
    result = runner.invoke(app, ["locate", *map(str, bad), str(good), "--json"])
    assert result.exit_code == 0, result.output  # one image worked
    rows = json.loads(result.output)
    assert [r["status"] for r in rows] == ["input_error"] * 5 + ["ok"]
    messages = [r["error"] for r in rows[:5]]
    for msg, expected in zip(
        messages,
        [
            "file not found",
            "empty (0 bytes)",
            "damaged or truncated",
            "decompression bomb",
            "not a supported image",
        ],
        strict=True,
    ):
        assert expected in msg
    only_bad = runner.invoke(app, ["locate", *map(str, bad)])
    assert only_bad.exit_code == 1
    assert "Traceback" not in only_bad.output and "file not found" in only_bad.output


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    image = gps_jpeg(tmp_path / "a.jpg", (1.0, 0.0, 0.0), (1.0, 0.0, 0.0))
    r1 = runner.invoke(app, ["locate", str(image), "--model", "m", "--prompt", "nope"])
    assert r1.exit_code == 2 and "unknown prompt style 'nope'" in r1.output
    r2 = runner.invoke(app, ["locate", str(image), "--model", "m", "--verifier", "v"])
    assert r2.exit_code == 2 and "verifier needs samples >= 2" in r2.output
    r3 = runner.invoke(app, ["locate", str(image), "--samples", "3"])
    assert r3.exit_code == 2 and "need --model" in r3.output


def test_locate_with_a_model_prints_answer_and_trace_and_writes_jsonl(tmp_path: Path) -> None:
    image = tmp_path / "street.jpg"
    Image.new("RGB", (800, 600), "gray").save(image)
    answer = '{"lat": 47.0502, "lon": 8.3093, "city": "Luzern", "country": "Switzerland"}'
    out = tmp_path / "out"
    with FakeOpenAIServer(default=reply(answer)) as server:
        args = ["locate", str(image), str(image), "--model", "fake-vlm", "--base-url", server.base_url]
        result = runner.invoke(app, [*args, "--prompt", "direct", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert (
        "47.05020, 8.30930" in result.output
        and "Luzern" in result.output
        and "trace (fake-vlm" in result.output
    )
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert [t.sample_id for t in trajectories] == ["street", "street-2"]
    assert len(server.chat_requests) == 2


def test_locate_with_samples_prints_each_sample(tmp_path: Path) -> None:
    image = tmp_path / "street.jpg"
    Image.new("RGB", (320, 240), "gray").save(image)
    with FakeOpenAIServer(default=reply('{"lat": 47.0502, "lon": 8.3093}')) as server:
        args = [
            "locate",
            str(image),
            "--model",
            "fake-vlm",
            "--base-url",
            server.base_url,
            "--prompt",
            "direct",
        ]
        result = runner.invoke(app, [*args, "--samples", "3", "--json"])
    (row,) = json.loads(result.output)
    assert result.exit_code == 0 and row["samples"] == 3 and row["aggregator"] == "medoid"
    assert row["prediction"]["confidence"] == 0.8 and len(server.chat_requests) == 3  # (3+1)/(3+2)
