"""End to end over HTTP: generated images, the fake OpenAI-compatible server, exact summary numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from eval_data import PLACES, make_csv_dataset
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer, error, reply, tool_call

ANSWERS = {sid: (lat, lon, city, country) for sid, lat, lon, country, city in PLACES}
ANSWERS["berlin"] = (53.5511, 9.9937, "Hamburg", "Germany")


def _sample_id(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages", []))
    ids = [sid for sid in ANSWERS if re.search(rf"\b{sid}\b", text)]
    return ids[0] if ids else ""


def _answer(sid: str) -> str:
    lat, lon, city, country = ANSWERS[sid]
    return json.dumps({"lat": lat, "lon": lon, "city": city, "country": country})


def script(body: dict[str, Any]):  # type: ignore[no-untyped-def]
    """Per sample: paris zooms first, tokyo answers garbage, nyc hits a server error."""
    sid = _sample_id(body)
    turn = sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")
    if sid == "paris" and turn == 0:
        return reply(
            "Let me zoom in.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 32, 24]})]
        )
    if sid == "tokyo":
        return reply("I honestly cannot tell, sorry.")
    if sid == "nyc":
        return error(500, "engine died")
    return reply(f"Clues point here. {_answer(sid)}", prompt_tokens=100, completion_tokens=20)


def test_eval_over_http_with_scripted_agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(script) as server:
        monkeypatch.setenv("GEOSLEUTH_TEST_BASE_URL", server.base_url)
        result = CliRunner().invoke(
            app,
            [
                "eval",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--agent-fn",
                "eval_fake_agent:chatting",
                "--concurrency",
                "4",
            ],
        )
        requests = server.chat_requests
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert len(requests) == 9  # paris twice, everyone else once (the 500 is not retried)
    assert summary["status_counts"] == {"model_error": 1, "ok": 6, "parse_failed": 1}
    metrics = summary["metrics"]
    assert metrics["acc@1km"]["value"] == 62.5 and metrics["acc@750km"]["value"] == 75.0
    assert metrics["text_acc_country"]["value"] == 75.0 and metrics["text_acc_city"]["value"] == 62.5
    tools = summary["tools"]
    assert tools["per_tool"]["image_zoom_in_tool"]["calls"] == 1 and tools["tool_success_rate"] == 1.0
    assert tools["total_tokens"] == 6 * 120 + 15 + 15  # 6 scripted answers, paris' zoom turn, tokyo's reply
    records = [
        json.loads(line) for line in (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()
    ]
    nyc = next(r for r in records if r["sample_id"] == "nyc")
    assert nyc["status"] == "model_error" and "engine died" in nyc["error"]


def same_answer_everywhere(body: dict[str, Any]):  # type: ignore[no-untyped-def]
    """The real agent never sees sample ids: zoom once, then answer Paris for every image."""
    if not any(m.get("role") == "assistant" for m in body.get("messages", [])):
        return reply("Zooming.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 500]})])
    return reply(_answer("paris"), prompt_tokens=100, completion_tokens=20)


def test_eval_with_the_real_agent(tmp_path: Path) -> None:
    tools = pytest.importorskip("geosleuth.tools")
    if not hasattr(tools, "build_registry"):
        pytest.skip("geosleuth.tools.build_registry has not landed yet")
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(same_answer_everywhere) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                str(data),
                "--out",
                str(tmp_path / "run"),
                "--model",
                "fake-vlm",
                "--base-url",
                server.base_url,
                "--prompt",
                "thinking_with_map",
                "--tools",
                "image_zoom_in_tool",
                "--concurrency",
                "4",
            ],
        )
        requests = server.chat_requests
    assert result.exit_code == 0, result.output
    assert len(requests) == 16 and all("data:image" in r.body.decode() for r in requests)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["status_counts"] == {"ok": 8}
    metrics = summary["metrics"]
    assert metrics["acc@1km"]["value"] == 12.5 and metrics["acc@2500km"]["value"] == 25.0
    assert metrics["text_acc_country"]["value"] == 12.5
    zoom = summary["tools"]["per_tool"]["image_zoom_in_tool"]
    assert zoom["calls"] == 8 and zoom["success_rate"] == 1.0
    page = (tmp_path / "run" / "html" / "samples" / "paris.html").read_text()
    assert "image_zoom_in_tool" in page and page.count("data:image/jpeg;base64") >= 2


def test_real_agent_with_several_samples_reports_pass_at_k(tmp_path: Path) -> None:
    tools = pytest.importorskip("geosleuth.tools")
    if not hasattr(tools, "build_registry"):
        pytest.skip("geosleuth.tools.build_registry has not landed yet")
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(same_answer_everywhere) as server:
        args = ["eval", str(data), "--out", str(tmp_path / "run"), "--model", "fake-vlm", "--base-url"]
        args += [
            server.base_url,
            "--prompt",
            "thinking_with_map",
            "--tools",
            "image_zoom_in_tool",
            "--samples",
            "3",
        ]
        result = CliRunner().invoke(app, [*args, "--no-report"])
        assert result.exit_code == 0, result.output
        assert len(server.chat_requests) == 8 * 3 * 2
    report = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--json", "--no-html", "--no-plots"])
    multi = json.loads(report.output)["multi_sample"]
    assert multi["n"] == 3
    assert multi["pass@k"]["acc@1km"] == {"1": 12.5, "2": 12.5, "3": 12.5}
    assert multi["best@n"]["acc@1km"] == 12.5 and multi["aggregated"]["acc@1km"] == 12.5
