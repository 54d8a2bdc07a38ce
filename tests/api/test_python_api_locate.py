"""`geosleuth.locate` / `alocate`: the CLI's options by the CLI's names, offline or with a model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

import geosleuth
from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer, reply


def gps_jpeg(path: Path) -> Path:
    """A blank photo whose EXIF says 47°03'N 8°18'36"E (47.05, 8.31)."""
    image = Image.new("RGB", (320, 240), "white")
    exif = image.getexif()
    exif.get_ifd(0x8825).update({1: "N", 2: (47.0, 3.0, 0.0), 3: "E", 4: (8.0, 18.0, 36.0)})
    image.save(path, exif=exif)
    return path


def test_offline_locate_answers_as_the_cli_does(tmp_path: Path) -> None:
    image = gps_jpeg(tmp_path / "gps.jpg")
    trajectory = geosleuth.locate(image, no_ocr=True)
    assert isinstance(trajectory, geosleuth.Trajectory) and trajectory.status == "ok"
    assert (trajectory.prediction.lat, trajectory.prediction.lon) == (47.05, 8.31)
    printed = CliRunner().invoke(app, ["locate", str(image), "--no-ocr", "--json"])
    (row,) = json.loads(printed.output)
    assert row["prediction"] == trajectory.prediction.model_dump(exclude={"raw"}, exclude_none=True)


def test_locate_with_a_model_sends_the_options_and_reads_the_answer(tmp_path: Path) -> None:
    image = gps_jpeg(tmp_path / "gps.jpg")
    answer = json.dumps({"lat": 46.95, "lon": 7.45, "city": "Bern", "country": "Switzerland"})
    with FakeOpenAIServer([reply(answer)] * 2) as server:
        trajectory = geosleuth.locate(
            image, "fake-vlm", base_url=server.base_url, prompt="direct", temperature=0.3, max_tokens=77
        )
        from_async = asyncio.run(
            geosleuth.alocate(image, "fake-vlm", base_url=server.base_url, prompt="direct")
        )
        bodies: list[dict[str, Any]] = [r.json for r in server.chat_requests]
    assert trajectory.prediction.city == "Bern" and from_async.prediction.city == "Bern"
    assert bodies[0]["temperature"] == 0.3 and bodies[0]["max_tokens"] == 77
    assert "temperature" not in bodies[1]


def test_locate_refuses_options_it_cannot_honour(tmp_path: Path) -> None:
    image = gps_jpeg(tmp_path / "gps.jpg")
    with pytest.raises(TypeError, match="unknown option.*colour"):
        geosleuth.locate(image, colour="red")
    with pytest.raises(ValueError, match="--samples and --verifier need --model"):
        geosleuth.locate(image, samples=2)
    with pytest.raises(ValueError, match="style"):
        geosleuth.locate(image, "m", base_url="http://127.0.0.1:9/v1", prompt="no-such-style")
