"""A model-driven job against the scripted fake OpenAI server: turns stream live, tool images are served."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image
from starlette.testclient import TestClient
from webapp_helpers import events_of, make_settings

from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import reply, tool_call
from geosleuth.webapp import create_app

ANSWER = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'


def photo() -> bytes:
    image = Image.new("RGB", (800, 600), (120, 160, 200))
    for x in range(0, 800, 50):
        image.paste((x % 255, 90, 40), (x, 200, x + 25, 260))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG")
    return buffer.getvalue()


def test_model_job_streams_turns_with_tool_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-browser")
    script = [
        reply(
            "A shop sign; let me zoom in.",
            tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [100, 150, 500, 350]})],
            reasoning="The <b>sign</b> may name the town.",
        ),
        reply(f"The zoomed sign reads Zürich. {ANSWER}"),
    ]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(
            tmp_path,
            model="fake-vlm",
            base_url=server.base_url,
            prompt_style="thinking_with_map",
            agent_options={"tools": ["image_zoom_in_tool"], "tool_calling": "native"},
        )
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
            response = client.post(
                "/api/locate", files={"image": ("street.jpg", photo(), "image/jpeg")}, data={"samples": "1"}
            )
            assert response.status_code == 202, response.text
            job = response.json()
            assert job["mode"] == "model" and job["prompt_style"] == "thinking_with_map"
            events = events_of(client, job["id"])
            tool_image = client.get(events[-1]["trajectory"]["turns"][0]["tool_calls"][0]["images"][0])
        assert server.chat_requests[0].headers.get("authorization") == "Bearer sk-never-in-the-browser"
    kinds = [e["type"] for e in events]
    assert kinds == ["status", "status", "turn", "turn", "turn", "result"]
    generated, acted, final = (e["turn"] for e in events[2:5])
    assert generated["index"] == acted["index"] == 0 and final["index"] == 1
    assert generated["tool_calls"] == [] and generated["reasoning"] == "The <b>sign</b> may name the town."
    (call,) = acted["tool_calls"]
    assert call["name"] == "image_zoom_in_tool" and call["ok"]
    assert call["arguments"] == {"bbox_2d": [100, 150, 500, 350]}
    assert call["images"] and call["images"][0].startswith(f"/api/jobs/{job['id']}/files/images/")
    assert tool_image.status_code == 200 and Image.open(io.BytesIO(tool_image.content)).format == "PNG"
    result = events[-1]
    assert result["status"] == "done" and result["trajectory"]["prediction"]["city"] == "Zürich"
    assert result["map_url"] is not None
    assert "sk-never-in-the-browser" not in str(events)


def test_parallel_samples_stream_separately_and_aggregate(tmp_path: Path) -> None:
    script = [reply(f"Zürich. {ANSWER}"), reply('Near Zürich. {"lat": 47.40, "lon": 8.55, "country": "CH"}')]
    with FakeOpenAIServer(script) as server:
        settings = make_settings(
            tmp_path,
            model="fake-vlm",
            base_url=server.base_url,
            prompt_style="thinking_with_map",
            agent_options={"tools": [], "tool_calling": "native"},
        )
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
            response = client.post(
                "/api/locate", data={"example": "1", "samples": "2", "prompt": "thinking_with_map"}
            )
            assert response.status_code == 202, response.text
            events = events_of(client, response.json()["id"])
    turns = [e for e in events if e["type"] == "turn"]
    assert sorted(e["sample"] for e in turns) == [0, 1] and all(e["samples"] == 2 for e in turns)
    trajectory = events[-1]["trajectory"]
    assert len(trajectory["samples"]) == 2 and trajectory["aggregator"] == "medoid"
    assert trajectory["prediction"]["lat"] == pytest.approx(47.39, abs=0.05)
