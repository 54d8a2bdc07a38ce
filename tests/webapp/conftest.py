"""Fixtures for the web app tests: an app client, a small evaluated run, test images."""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient
from typer.testing import CliRunner
from webapp_helpers import make_settings

from geosleuth.cli.app import app as cli
from geosleuth.webapp import create_app

PLACES = [
    ("paris", 48.8566, 2.3522, "France"),
    ("berlin", 52.52, 13.405, "Germany"),
    ("tokyo", 35.68, 139.65, "Japan"),
]


@pytest.fixture(scope="session")
def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding one reported run (``demo``) made by `geosleuth eval` with a scripted agent."""
    root = tmp_path_factory.mktemp("runs")
    bench = root.parent / "bench"
    (bench / "images").mkdir(parents=True)
    with (bench / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        for i, (sid, lat, lon, country) in enumerate(PLACES):
            Image.new("RGB", (64, 48), (40 * i, 90, 150)).save(bench / "images" / f"{sid}.jpg")
            writer.writerow([sid, f"{sid}.jpg", lat, lon, country])
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "eval",
            str(bench),
            "--out",
            str(root / "demo"),
            "--agent-fn",
            "webapp_stub_agent:agent",
            "--no-report",
        ],
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["report", str(root / "demo"), "--no-plots"])
    assert result.exit_code == 0, result.output
    return root


@pytest.fixture
def client(tmp_path: Path, run_root: Path) -> Iterator[TestClient]:
    with TestClient(create_app(make_settings(tmp_path, runs=[run_root])), base_url="http://127.0.0.1") as c:
        yield c
