"""Jobs as they happen, through the real app: queue positions, cancelling a waiting and a running
offline job, and a finished job without an answer told apart from one with an answer."""

from __future__ import annotations

import io
import time
from pathlib import Path

from PIL import Image
from starlette.testclient import TestClient
from webapp_helpers import events_of, make_settings

from geosleuth.webapp import create_app


def _blank_png() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (64, 48), (120, 120, 120)).save(buffer, format="PNG")
    return buffer.getvalue()


def _wait_for(client: TestClient, job_id: str, kind: str, timeout_s: float = 60.0) -> list[dict]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        events = client.get(f"/api/jobs/{job_id}").json()["events"]
        if any(e["type"] == kind for e in events):
            return events
        time.sleep(0.02)
    raise AssertionError(f"no {kind!r} event for job {job_id}")


def test_queue_positions_and_cancel_while_waiting_and_running(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, concurrency=1)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        first = client.post("/api/locate", data={"example": "1"}).json()  # OCR: seconds of work
        _wait_for(client, first["id"], "turn")  # running: the EXIF step has streamed
        second = client.post("/api/locate", files={"image": ("a.png", _blank_png(), "image/png")}).json()
        third = client.post("/api/locate", files={"image": ("b.png", _blank_png(), "image/png")}).json()
        queued = [client.get(f"/api/jobs/{j['id']}").json()["events"][0] for j in (second, third)]
        assert [e["position"] for e in queued] == [1, 2]
        assert "next in line" in queued[0]["message"] and "1 job ahead" in queued[1]["message"]

        cancelled = client.post(f"/api/jobs/{second['id']}/cancel")  # still waiting
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
        moved_up = client.get(f"/api/jobs/{third['id']}").json()["events"][-1]
        assert moved_up["position"] == 1 and "next in line" in moved_up["message"]

        assert client.post(f"/api/jobs/{first['id']}/cancel").status_code == 200
        events = events_of(client, first["id"])  # the stream ends at the cancellation
        assert events[-1]["type"] == "cancelled" and not any(e["type"] == "result" for e in events)
        assert client.post(f"/api/jobs/{first['id']}/cancel").status_code == 409  # already ended

        last = events_of(client, third["id"])  # the queue goes on with the job left
        assert [e.get("position") for e in last if e["type"] == "status"] == [2, 1, None]
        assert last[2]["status"] == "running" and last[-1]["type"] == "result"
        jobs = {j["id"]: j for j in client.get("/api/jobs").json()}
        assert jobs[first["id"]]["status"] == "cancelled" and jobs[second["id"]]["status"] == "cancelled"
        # a blank photo runs to its end without an answer: "done", with an outcome that says so
        assert jobs[third["id"]]["status"] == "done" and jobs[third["id"]]["outcome"] == "no_evidence"
        assert "trajectory" not in client.get(f"/api/jobs/{first['id']}").json()


def test_a_cancelled_offline_job_keeps_its_slot_until_its_step_returns(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, concurrency=1)
    with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
        first = client.post("/api/locate", data={"example": "1"}).json()
        _wait_for(client, first["id"], "turn")  # EXIF done: the OCR step is running
        second = client.post("/api/locate", files={"image": ("a.png", _blank_png(), "image/png")}).json()
        answer = client.post(f"/api/jobs/{first['id']}/cancel").json()
        assert answer["status"] == "cancelling"  # OCR cannot be interrupted inside its step
        assert client.post(f"/api/jobs/{first['id']}/cancel").status_code == 200  # asking again is harmless
        events = events_of(client, first["id"])
        told = [e for e in events if e.get("status") == "cancelling"]
        assert told and "keeps its worker slot" in told[0]["message"]
        assert events[-1]["type"] == "cancelled" and not any(e["type"] == "result" for e in events)
        later = events_of(client, second["id"])
        started = next(e for e in later if e.get("status") == "running")
        # the queued job started only once the cancelled one had let its slot go
        assert started["at"] >= events[-1]["at"]
