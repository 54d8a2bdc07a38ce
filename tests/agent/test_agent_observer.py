"""Observer mode: text-only reasoners get the image as text, image tools answer in text, and
every consumer of the trajectory (verifier, SFT export, HTML report, web app) shows the
observations. The reasoner servers here refuse any request that carries an image, like a
text-only model does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agent_helpers import make_config
from PIL import Image
from typer.testing import CliRunner

from geosleuth.agent import run_task, to_openai_chat
from geosleuth.agent.observer import OBSERVE_TOOL, Frame, Observation, describe_offline
from geosleuth.cli.app import app
from geosleuth.core.records import Task, TrajectoryStatus, Usage
from geosleuth.testing import FakeOpenAIServer, Step, error, reply, tool_call
from geosleuth.tools.base import ToolRegistry

ANSWER = '{"lat": 47.0505, "lon": 8.3064, "city": "Luzern", "country": "Switzerland"}'
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"
OVERFLOW = (
    "This model's maximum context length is 2048 tokens. However, you requested 120232 tokens "
    "(120232 in the messages, 0 in the completion). Please reduce the length of the messages or completion."
)


class StubObserver:
    """A deterministic observer that says what it was shown (and counts its calls)."""

    name = "stub-observer"

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[int, int], Frame | None]] = []

    async def observe(
        self, image: Image.Image, target: str, *, frame: Frame | None = None, path: str | None = None
    ) -> Observation:
        self.calls.append((target, image.size, frame))
        text = f"{target} {image.size[0]}x{image.size[1]}: a sign reading 'Konditorei Frey, 6004 Luzern'"
        return Observation(text, self.name, target, 0.01, Usage(prompt_tokens=100, completion_tokens=20))  # type: ignore[arg-type]

    async def aclose(self) -> None:
        return None


def text_only(script: list[Step]) -> Any:
    """A reasoner that answers the script in order but refuses images the way llama.cpp does."""
    steps = iter(script)

    def serve(payload: dict[str, Any]) -> Step:
        if "image_url" in json.dumps(payload):
            return error(400, OVERFLOW)
        return next(steps)

    return serve


async def test_text_only_reasoner_never_receives_pixels(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    script = [
        reply(
            "Zoom on the sign.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 400, 300]})]
        ),
        reply(f"The sign names Luzern. {ANSWER}"),
    ]
    observer = StubObserver()
    async with FakeOpenAIServer(text_only(script), model="smollm") as server:
        cfg = make_config(
            server.base_url,
            prompt_style="thinking_with_map",
            tool_calling="native",
            bbox_convention="absolute",
            observer="offline",
        )
        traj = await run_task(
            Task(id="q", image=str(query_image)),
            cfg,
            artifacts_dir=tmp_path,
            registry=registry,
            observer=observer,
        )
    assert traj.status == TrajectoryStatus.OK, traj.error
    requests = [r.json for r in server.chat_requests]
    assert len(requests) == 2 and all("image_url" not in json.dumps(r) for r in requests)
    # the photo: observed once, in the frame the prompt states (3000x2000 sent within 2 M pixels)
    target, size, frame = observer.calls[0]
    assert (target, size) == ("photo", (3000, 2000)) and frame is not None
    assert frame.size == tuple(traj.metadata["image_size_sent"]) and frame.convention == "absolute"
    user = requests[0]["messages"][1]["content"]
    assert isinstance(user, str) and "photo 3000x2000: a sign reading" in user
    assert f"TOOL OUTPUT {OBSERVE_TOOL} photo by stub-observer" in user  # fenced: OCR text is data
    assert "stub-observer" in requests[0]["messages"][0]["content"]  # the system prompt says who describes
    # the zoom is re-observed and answered in text; its crop is still saved for the report and web app
    assert observer.calls[1][0] == "region"
    tool_msg = next(m for m in requests[1]["messages"] if m["role"] == "tool")
    assert "region " in tool_msg["content"] and "Konditorei Frey" in tool_msg["content"]
    obs_turn, zoom_turn, answer_turn = traj.turns
    assert obs_turn.note == "observation" and obs_turn.tool_calls[0].name == OBSERVE_TOOL
    assert obs_turn.usage.total_tokens == 0  # the observer's tokens are counted apart
    info = traj.metadata["observer"]
    assert info["latency_s"] == pytest.approx(0.02)
    assert {k: info[k] for k in ("name", "observations", "usage")} == {
        "name": "stub-observer",
        "observations": 2,
        "usage": {"prompt_tokens": 200, "completion_tokens": 40},
    }
    zoom = zoom_turn.tool_calls[0]
    assert zoom.ok and "region" in zoom.result_text and (tmp_path / zoom.result_images[0]).exists()
    assert answer_turn.index == 2 and traj.prediction is not None and traj.prediction.city == "Luzern"


async def test_observation_turn_is_not_charged_to_the_turn_budget(
    query_image: Path, registry: ToolRegistry
) -> None:
    async with FakeOpenAIServer(text_only([reply(ANSWER)])) as server:
        cfg = make_config(server.base_url, max_turns=1, observer="offline")
        traj = await run_task(
            Task(id="q", image=str(query_image)), cfg, registry=registry, observer=StubObserver()
        )
    assert traj.status == TrajectoryStatus.OK and len(traj.turns) == 2


async def test_image_overflow_error_names_the_observer_option(
    query_image: Path, registry: ToolRegistry
) -> None:
    async with FakeOpenAIServer(text_only([])) as server:
        traj = await run_task(
            Task(id="q", image=str(query_image)),
            make_config(server.base_url, max_retries=0),
            registry=registry,
        )
    assert traj.status == TrajectoryStatus.MODEL_ERROR
    assert "you requested 120232 tokens" in (traj.error or "") and "--observer offline" in (traj.error or "")


async def test_unrelated_model_errors_do_not_blame_the_image(
    query_image: Path, registry: ToolRegistry
) -> None:
    async with FakeOpenAIServer(
        [error(400, "tool_choice auto requires --enable-auto-tool-choice")]
    ) as server:
        traj = await run_task(
            Task(id="q", image=str(query_image)),
            make_config(server.base_url, max_retries=0),
            registry=registry,
        )
    assert traj.status == TrajectoryStatus.MODEL_ERROR and "--observer" not in (traj.error or "")


def vlm_observer(payload: dict[str, Any]) -> Step:
    messages = payload["messages"]
    assert "image_url" in json.dumps(messages)  # the observer is the one that sees
    prompt = messages[-1]["content"][-1]["text"]
    if prompt.startswith("This is a zoomed region"):
        return reply("Close-up: 'Tel. +41 41 410 23 45'.", prompt_tokens=50, completion_tokens=10)
    return reply("Temperate town; a shop sign: 'Konditorei Frey', '6004 Luzern'.", prompt_tokens=900)


async def test_model_observer_serves_samples_and_a_text_only_verifier(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    def reasoner(payload: dict[str, Any]) -> Step:
        if "image_url" in json.dumps(payload):
            return error(400, "image input is not supported by this model")
        if "Candidate 1" in json.dumps(payload):  # the verifier
            return reply(ANSWER)
        if any(m["role"] == "tool" for m in payload["messages"]):
            return reply(ANSWER)
        return reply(None, tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 300]})])

    async with FakeOpenAIServer(vlm_observer, model="qwen-vl") as obs, FakeOpenAIServer(reasoner) as srv:
        cfg = make_config(
            srv.base_url,
            prompt_style="thinking_with_map",
            tool_calling="native",
            samples=2,
            verifier_model="fake-vlm",
            observer="qwen-vl",
            observer_base_url=obs.base_url,
        )
        traj = await run_task(
            Task(id="q", image=str(query_image)), cfg, artifacts_dir=tmp_path, registry=registry
        )
    assert traj.status == TrajectoryStatus.OK, traj.error
    assert traj.aggregator == "verifier:fake-vlm"
    prompts = [r.json["messages"][-1]["content"][-1]["text"] for r in obs.chat_requests]
    photo = [p for p in prompts if not p.startswith("This is a zoomed region")]
    assert len(photo) == 1 and "macro to micro" in photo[0]  # one description shared by both samples
    assert len(prompts) == 3  # plus one zoomed region per sample
    assert (
        obs.chat_requests[0].json["messages"][-1]["content"][0]["image_url"]["url"].startswith("data:image/")
    )
    verifier = next(r.json for r in srv.chat_requests if "Candidate 1" in json.dumps(r.json))
    assert "6004 Luzern" in verifier["messages"][1]["content"]  # the verifier reads the description
    for sample in traj.samples:
        assert sample.turns[0].tool_calls[0].provider == "observer:qwen-vl"
        assert sample.metadata["observer"]["usage"]["prompt_tokens"] == 950


async def test_failing_observer_is_a_model_error_before_the_reasoner_runs(
    query_image: Path, registry: ToolRegistry
) -> None:
    async with FakeOpenAIServer([error(503)] * 2) as obs, FakeOpenAIServer([]) as srv:
        cfg = make_config(srv.base_url, observer="vlm", observer_base_url=obs.base_url, max_retries=1)
        traj = await run_task(Task(id="q", image=str(query_image)), cfg, registry=registry)
    assert traj.status == TrajectoryStatus.MODEL_ERROR and "observer vlm" in (traj.error or "")
    assert srv.chat_requests == [] and traj.turns[0].tool_calls[0].ok is False


async def test_consumers_show_the_observations(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    from geosleuth.eval.report.html import _turns_html
    from geosleuth.training.data.sft import sft_record
    from geosleuth.webapp.views import trajectory_view

    script = [
        reply(None, tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 400, 300]})]),
        reply(ANSWER),
    ]
    async with FakeOpenAIServer(text_only(script)) as server:
        cfg = make_config(
            server.base_url, prompt_style="thinking_with_map", tool_calling="native", observer="x"
        )
        traj = await run_task(
            Task(id="q", image=str(query_image)),
            cfg,
            artifacts_dir=tmp_path,
            registry=registry,
            observer=StubObserver(),
        )
    chat = to_openai_chat(traj)
    assert "photo 3000x2000" in chat["messages"][1]["content"]
    sft = sft_record(traj, "trl", "hermes", tmp_path)
    assert "photo 3000x2000" in json.dumps(sft) and "region " in json.dumps(sft)
    view = trajectory_view(traj, lambda ref: f"/img/{ref}")
    assert view["turns"][0]["tool_calls"][0]["name"] == OBSERVE_TOOL
    assert "photo 3000x2000" in view["turns"][0]["tool_calls"][0]["result_text"]
    html = _turns_html(tmp_path, traj)
    assert OBSERVE_TOOL in html and "Konditorei Frey" in html


def test_offline_observer_reads_the_bundled_sign() -> None:
    pytest.importorskip("rapidocr")
    img = Image.open(EXAMPLE)
    frame = Frame((640, 430), "absolute", 0.5)
    text = describe_offline(img, "photo", frame, str(EXAMPLE))
    assert text.startswith("Photo of 640x430 pixels")
    assert "EXIF: The image has no EXIF metadata" in text
    line = next(ln for ln in text.splitlines() if "6004 Luzern" in ln)
    x1, y1, x2, y2 = json.loads(line.split(" at ")[1].split(" (")[0])
    assert 0 <= x1 < x2 <= 640 and 0 <= y1 < y2 <= 430  # boxes in the frame the reasoner zooms in
    assert "+41 41 410 23 45" in text and ".ch" in text and "Luzern, Lucerne, Switzerland" in text
    region = describe_offline(img.crop((380, 460, 900, 560)), "region")
    assert region.startswith("Zoomed region") and " at [" not in region


def test_observer_flag_needs_a_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["locate", str(EXAMPLE), "--observer", "offline"])
    assert result.exit_code == 2 and "--observer" in result.output


def test_eval_passes_the_observer_and_provider_settings_through(tmp_path: Path) -> None:
    pytest.importorskip("rapidocr")
    folder = tmp_path / "data"
    (folder / "images").mkdir(parents=True)
    Image.open(EXAMPLE).save(folder / "images" / "a.png")
    Image.new("RGB", (96, 64), (40, 90, 160)).save(folder / "images" / "b.png")
    (folder / "data.csv").write_text(
        "id,image,lat,lon\na,images/a.png,47.05,8.31\nb,images/b.png,47.05,8.31\n"
    )

    def serve(payload: dict[str, Any]) -> Step:
        if "image_url" in json.dumps(payload):
            return error(400, OVERFLOW)
        return reply(ANSWER)

    with FakeOpenAIServer(serve) as server:
        result = CliRunner().invoke(
            app,
            [
                "eval",
                str(folder / "data.csv"),
                "--out",
                str(tmp_path / "run"),
                "--model",
                "m",
                "--base-url",
                server.base_url,
                "--observer",
                "offline",
                "--max-tokens",
                "32",
                "--provider",
                "openai",
                "--reasoning-effort",
                "low",
                "--no-report",
            ],
        )
        bodies = [r.json for r in server.chat_requests]
    assert result.exit_code == 0, result.output
    assert len(bodies) == 2 and all("image_url" not in json.dumps(b) for b in bodies)
    assert all(b["max_completion_tokens"] == 32 and b["reasoning_effort"] == "low" for b in bodies)
    assert any("6004 Luzern" in b["messages"][1]["content"] for b in bodies)
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["config"]["observer"] == "offline"
    lines = (tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()
    assert {json.loads(line)["status"] for line in lines} == {"ok"}
