"""Regressions found by end-to-end QA of `geosleuth locate` through the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.agent import read_trajectories
from geosleuth.cli.app import app
from geosleuth.cli.locate import summary
from geosleuth.core.records import ToolCallRecord, Trajectory, Turn, Usage
from geosleuth.testing import FakeOpenAIServer, reply

runner = CliRunner()


def _gps_jpeg(path: Path) -> Path:
    img = Image.new("RGB", (320, 240), "white")
    exif = img.getexif()
    exif.get_ifd(0x8825).update({1: "N", 2: (47.0, 3.0, 0.0), 3: "E", 4: (8.0, 18.0, 36.0)})
    img.save(path, exif=exif)
    return path


def test_offline_trajectory_image_path_resolves_from_the_out_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _gps_jpeg(tmp_path / "gps.jpg")
    result = runner.invoke(app, ["locate", "gps.jpg", "--out", "out", "--no-ocr"])
    assert result.exit_code == 0, result.output
    (traj,) = read_trajectories(tmp_path / "out" / "trajectories.jsonl")
    url = Path(traj.messages[0]["content"][0]["image_url"]["url"])
    resolved = url if url.is_absolute() else tmp_path / "out" / url
    assert resolved.is_file()


def test_json_summary_of_n_samples_counts_their_turns_calls_and_tokens() -> None:
    def worked() -> Trajectory:
        turn = Turn(index=0, tool_calls=[ToolCallRecord(name="geocode")], usage=Usage(prompt_tokens=7))
        return Trajectory(sample_id="a", model="m", turns=[turn])

    aggregate = Trajectory(sample_id="a", model="m", samples=[worked(), worked()], aggregator="medoid")
    row = summary(Path("a.jpg"), aggregate)
    assert (row["turns"], len(row["tool_calls"]), row["tokens"], row["samples"]) == (2, 2, 14, 2)


def test_text_trace_shows_the_tool_result_not_its_untrusted_output_marker(tmp_path: Path) -> None:
    image = _gps_jpeg(tmp_path / "photo.jpg")
    script = [
        reply('<tool_call>\n{"name": "maps_geocode", "arguments": {"address": "Luzern"}}\n</tool_call>'),
        reply("<answer>\nCountry: Switzerland\nCity: Luzern\nLatitude: 47.05\nLongitude: 8.31\n</answer>"),
    ]
    with FakeOpenAIServer(script) as server:
        result = runner.invoke(
            app, ["locate", str(image), "--model", "fake", "--base-url", server.base_url, "-p", "spotagent"]
        )
    assert result.exit_code == 0, result.output
    (line,) = [x for x in result.output.splitlines() if "→ maps_geocode" in x]
    assert "<<<" not in line and "Luzern" in line.split(" ok: ", 1)[1]
    assert "coordinates from the model" in result.output


def test_locate_api_key_env_selects_the_key_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("MY_VLM_KEY", "sk-qa-123")
    image = _gps_jpeg(tmp_path / "photo.jpg")
    answer = reply('{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}')
    with FakeOpenAIServer([answer]) as server:
        result = runner.invoke(
            app,
            ["locate", str(image), "-m", "fake", "--base-url", server.base_url, "-p", "direct"]
            + ["--api-key-env", "MY_VLM_KEY", "--json"],
        )
        headers = server.chat_requests[0].headers
    assert result.exit_code == 0, result.output
    assert headers["authorization"] == "Bearer sk-qa-123" and "sk-qa-123" not in result.output
