"""A model reply nested deeper than the JSON decoder reads (issue 41, item 5) is a ``model_error``
for its image; the other images of the command go on."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

import geosleuth
from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer, reply
from geosleuth.testing.fake_openai import Step

ANSWER = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'
DEEP = "[" * 100_000 + "]" * 100_000


def deep_body() -> Step:
    body = '{"choices": [{"message": {"role": "assistant", "content": "hi", "extra": ' + DEEP + "}}]}"
    return Step(kind="reply", raw=body.encode())


def images(folder: Path) -> list[str]:
    paths = []
    for i in range(2):
        Image.new("RGB", (64, 48), (40 * i, 90, 150)).save(folder / f"i{i}.png")
        paths.append(str(folder / f"i{i}.png"))
    return paths


def test_locate_cli_records_the_deep_reply_and_goes_on(tmp_path: Path) -> None:
    with FakeOpenAIServer([deep_body(), reply(ANSWER)]) as server:
        result = CliRunner().invoke(
            app, ["locate", *images(tmp_path), "--model", "m", "--base-url", server.base_url, "--json",
                  "--prompt", "direct", "--concurrency", "1", "--out", str(tmp_path / "out")],
        )  # fmt: skip
    assert "Traceback" not in result.output and "RecursionError" not in result.output
    records = json.loads(result.stdout)
    assert [r["status"] for r in records] == ["model_error", "ok"]
    assert "nested deeper than the decoder reads" in records[0]["error"]


def test_the_api_returns_a_model_error_not_an_exception(tmp_path: Path) -> None:
    with FakeOpenAIServer([deep_body()]) as server:
        traj = geosleuth.locate(
            images(tmp_path)[0], "m", base_url=server.base_url, prompt="direct", out=tmp_path
        )
    assert traj.status == "model_error" and "nested deeper" in (traj.error or "")
