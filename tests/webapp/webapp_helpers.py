"""Shared helpers for the web app tests (a unique module name: pytest imports test folders flat)."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.testclient import TestClient

from geosleuth.webapp import ServeSettings


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
