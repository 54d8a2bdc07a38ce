"""Shared helpers for the web app tests (a unique module name: pytest imports test folders flat)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from PIL import Image
from starlette.testclient import TestClient
from typer.testing import CliRunner

from geosleuth.cli.app import app as cli
from geosleuth.webapp import ServeSettings

PLACES = [
    ("paris", 48.8566, 2.3522, "France"),
    ("berlin", 52.52, 13.405, "Germany"),
    ("tokyo", 35.68, 139.65, "Japan"),
]


def make_run(root: Path) -> Path:
    """``root/demo``: a reported run made by `geosleuth eval` with the scripted agent; returns ``root``."""
    bench = root / "bench"
    (bench / "images").mkdir(parents=True)
    with (bench / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        for i, (sid, lat, lon, country) in enumerate(PLACES):
            Image.new("RGB", (64, 48), (40 * i, 90, 150)).save(bench / "images" / f"{sid}.jpg")
            writer.writerow([sid, f"{sid}.jpg", lat, lon, country])
    runner = CliRunner()
    args = ["eval", str(bench), "--out", str(root / "runs" / "demo"), "--agent-fn", "webapp_stub_agent:agent"]
    result = runner.invoke(cli, [*args, "--no-report"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(cli, ["report", str(root / "runs" / "demo"), "--no-plots"])
    assert result.exit_code == 0, result.output
    return root / "runs"


def make_settings(tmp_path: Path, **overrides: object) -> ServeSettings:
    """Settings whose job files and tool cache live under ``tmp_path``."""
    values: dict[str, object] = {
        "workdir": tmp_path / "jobs",
        "tool_settings": {"cache": {"path": str(tmp_path / "tool_cache.sqlite")}},
    }
    values.update(overrides)
    return ServeSettings(**values)  # type: ignore[arg-type]


def events_of(client: TestClient, job_id: str) -> list[dict]:
    """Read the job's SSE stream to its end and decode every event."""
    with client.stream("GET", f"/api/jobs/{job_id}/events") as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        text = "".join(stream.iter_text())
    events = []
    for block in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            event = json.loads(fields["data"])
            assert fields["event"] == event["type"] and int(fields["id"]) == event["seq"]
            events.append(event)
    return events
