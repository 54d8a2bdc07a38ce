"""Cold-start synthesis with scripted observer and planner servers on 127.0.0.1 and real tool calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from typer.testing import CliRunner

from geosleuth.agent.client import ChatClient
from geosleuth.cli.app import app
from geosleuth.core.records import Sample, Trajectory
from geosleuth.testing.fake_openai import FakeOpenAIServer, Step, reply, tool_call
from geosleuth.tools.base import ToolContext, ToolError, ToolRegistry, ToolResult, tool
from geosleuth.training.data.sft import sft_record
from geosleuth.training.data.synthesis import SynthesisConfig, Synthesizer

CALLS: list[dict[str, Any]] = []


@tool
def image_zoom_in_tool(bbox_2d: list[int], ctx: ToolContext) -> ToolResult:
    """Zoom into a region.

    Args:
        bbox_2d: [x1, y1, x2, y2] pixels.
    """
    CALLS.append({"zoom": bbox_2d})
    x1, y1, x2, y2 = bbox_2d
    if x2 <= x1 or y2 <= y1 or ctx.image is None:
        raise ToolError("invalid box")
    return ToolResult(text="zoomed", images=[ctx.image.crop((x1, y1, x2, y2))])


@tool
def geocode(address: str) -> str:
    """Geocode an address.

    Args:
        address: the address.
    """
    CALLS.append({"geocode": address})
    return json.dumps({"lat": 48.8584, "lon": 2.2945, "name": address})


def registry(settings_path: str | None = None) -> ToolRegistry:
    return ToolRegistry([image_zoom_in_tool, geocode])  # type: ignore[list-item]


def _observer(payload: dict[str, Any]) -> Step:
    text = payload["messages"][0]["content"][1]["text"]
    if text.startswith("This is a zoomed region"):
        return reply("A blue street sign reading 'Av. Gustave Eiffel'.")
    return reply("Temperate city, Haussmann facades, an iron lattice tower; a small sign bottom left.")


def _planner_script(final_lat: float) -> list[Step]:
    return [
        reply(
            "The sign may name the street.",
            tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 20, 10]}, "c1")],
        ),
        reply(
            "Geocode it.",
            tool_calls=[tool_call("geocode", {"address": "Avenue Gustave Eiffel, Paris"}, "c2")],
        ),
        reply(json.dumps({"lat": final_lat, "lon": 2.2945, "city": "Paris", "country": "France"})),
    ]


@pytest.fixture()
def sample(tmp_path: Path) -> Sample:
    path = tmp_path / "q.png"
    Image.new("RGB", (64, 48), (120, 130, 140)).save(path)
    return Sample(id="s/1", image=str(path), lat=48.8584, lon=2.2945)


async def _run(sample: Sample, planner: list[Step], out: Path) -> tuple[dict[str, Any], int, int]:
    with FakeOpenAIServer(_observer) as obs_srv, FakeOpenAIServer(planner) as plan_srv:
        async with (
            ChatClient("obs", obs_srv.base_url, max_retries=0) as obs,
            ChatClient("plan", plan_srv.base_url, max_retries=0) as plan,
        ):
            synth = Synthesizer(
                SynthesisConfig(tools=("image_zoom_in_tool", "geocode")), registry(), obs, plan, out
            )
            report = await synth.run([sample])
        return report, len(obs_srv.chat_requests), len(plan_srv.chat_requests)


async def test_kept_trajectory_is_a_vlm_conversation(tmp_path: Path, sample: Sample) -> None:
    CALLS.clear()
    out = tmp_path / "synth"
    report, n_obs, n_plan = await _run(sample, _planner_script(48.8600), out)
    assert report["kept"] == 1 and report["rejected"] == {}
    assert n_obs == 2 and n_plan == 3  # photo + one zoomed region; three planner steps
    assert CALLS == [{"zoom": [0, 0, 20, 10]}, {"geocode": "Avenue Gustave Eiffel, Paris"}]
    traj = Trajectory.model_validate_json((out / "trajectories.jsonl").read_text().splitlines()[0])
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user", "assistant", "tool", "user", "assistant", "tool", "assistant"]
    assert traj.messages[1]["content"][0]["image_url"]["url"].startswith("file://")
    first = traj.messages[2]["content"]
    assert "iron lattice tower" in first and "The sign may name the street." in first
    assert "Gustave Eiffel'" in traj.messages[5]["content"]  # the zoom description feeds the next thought
    zoom_ref = traj.messages[4]["content"][0]["image_url"]["url"]
    assert (out / zoom_ref).exists()
    assert traj.messages[-1]["content"].endswith(
        '<answer>{"lat": 48.86, "lon": 2.2945, "city": "Paris", "country": "France"}</answer>'
    )
    assert traj.metadata["synthesis"]["distance_km"] < 1
    rec = sft_record(traj, "trl", "hermes", out)
    assert rec["images"][1] == str(out / zoom_ref)
    # resumable: a second run skips the finished sample without calling anyone
    report2, n_obs2, n_plan2 = await _run(sample, [], out)
    assert report2["skipped_already_done"] == 1 and n_obs2 == n_plan2 == 0


@pytest.mark.parametrize(
    ("planner", "reason"),
    [
        (lambda: _planner_script(49.5), "too_far"),  # ~71 km off
        (
            lambda: [
                reply("x", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [5, 5, 1, 1]}, "c")])
            ],
            "invalid_tool_call",
        ),
        (lambda: [reply("x", tool_calls=[tool_call("nope", {}, "c")])], "invalid_tool_call"),
        (
            lambda: [
                reply("x", tool_calls=[tool_call("geocode", {"address": "a"}, "c")]),
                reply("I am not sure."),
            ],
            "no_answer",
        ),
        (lambda: [reply('{"lat": 48.8584, "lon": 2.2945}')], "no_tool_call"),  # right, but no tool used
        (
            lambda: [
                reply("x", tool_calls=[tool_call("geocode", {"address": "a"}, f"c{i}")]) for i in range(6)
            ],
            "max_steps",
        ),
        (lambda: [], "model_error"),
    ],
)
async def test_rejections_are_recorded(tmp_path: Path, sample: Sample, planner: Any, reason: str) -> None:
    out = tmp_path / "synth"
    report, _, _ = await _run(sample, planner(), out)
    assert report["kept"] == 0 and report["rejected"] == {reason: 1}
    rec = json.loads((out / "rejected.jsonl").read_text())
    assert rec["sample_id"] == "s/1" and rec["reason"] == reason and rec["detail"]


def test_cli_synthesize(tmp_path: Path, sample: Sample) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(sample.model_dump_json() + "\n")
    with FakeOpenAIServer(_observer) as obs, FakeOpenAIServer(_planner_script(48.8584)) as plan:
        res = CliRunner().invoke(
            app,
            [
                "data", "synthesize", str(data), "-o", str(tmp_path / "o"),
                "--observer-model", "obs", "--observer-url", obs.base_url,
                "--planner-model", "plan", "--planner-url", plan.base_url,
                "--tools", "image_zoom_in_tool,geocode",
                "--registry-factory", "test_training_synthesis:registry",
            ],
        )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["kept"] == 1
    bad = CliRunner().invoke(
        app,
        [
            "data", "synthesize", str(data), "-o", str(tmp_path / "o2"),
            "--observer-model", "o", "--planner-model", "p",
            "--tools", "zzz", "--registry-factory", "test_training_synthesis:registry",
        ],
    )  # fmt: skip
    assert bad.exit_code == 1 and "unknown tool" in bad.output


async def test_torn_tail_is_cut_before_resuming(tmp_path: Path, sample: Sample) -> None:
    out = tmp_path / "synth"
    out.mkdir()
    rejected = json.dumps({"sample_id": "other", "reason": "too_far", "detail": ""}) + "\n"
    (out / "rejected.jsonl").write_text(rejected, encoding="utf-8")
    torn = Trajectory(sample_id=sample.id, model="m").model_dump_json()[:40]  # killed mid-write
    (out / "trajectories.jsonl").write_text(torn, encoding="utf-8")
    report, _, n_plan = await _run(sample, _planner_script(48.8600), out)
    assert report["skipped_already_done"] == 0 and report["kept"] == 1 and n_plan == 3
    lines = (out / "trajectories.jsonl").read_text(encoding="utf-8").splitlines()
    assert [Trajectory.model_validate_json(line).sample_id for line in lines] == [sample.id]
    assert (out / "rejected.jsonl").read_text(encoding="utf-8") == rejected


async def test_model_errors_are_retried_on_resume(tmp_path: Path, sample: Sample) -> None:
    """An outage rejects every sample with model_error; the rerun must try them again."""
    out = tmp_path / "synth"
    report, _, _ = await _run(sample, [], out)  # the planner answers 500: script exhausted
    assert report["rejected"] == {"model_error": 1}
    report, _, n_plan = await _run(sample, _planner_script(48.8600), out)
    assert report["skipped_already_done"] == 0 and report["kept"] == 1 and n_plan == 3
    assert (out / "rejected.jsonl").read_text(encoding="utf-8") == ""


def test_boxes_follow_the_trained_styles_convention() -> None:
    from geosleuth.training.data.synthesis import in_style_frame

    args = {"bbox_2d": [0, 0, 32, 12], "label": "sign"}
    assert in_style_frame(args, (64, 48), "absolute") == args
    assert in_style_frame(args, (64, 48), "relative1000") == {"bbox_2d": [0, 0, 500, 250], "label": "sign"}
    assert in_style_frame({"address": "Paris"}, (64, 48), "relative1000") == {"address": "Paris"}


async def test_a_relative_style_gets_relative_boxes_in_its_sft_data(tmp_path: Path, sample: Sample) -> None:
    out = tmp_path / "synth"
    with FakeOpenAIServer(_observer) as obs_srv, FakeOpenAIServer(_planner_script(48.86)) as plan_srv:
        async with (
            ChatClient("obs", obs_srv.base_url, max_retries=0) as obs,
            ChatClient("plan", plan_srv.base_url, max_retries=0) as plan,
        ):
            config = SynthesisConfig(tools=("image_zoom_in_tool", "geocode"), style="thinking_with_map")
            assert (await Synthesizer(config, registry(), obs, plan, out).run([sample]))["kept"] == 1
    traj = Trajectory.model_validate_json((out / "trajectories.jsonl").read_text().splitlines()[0])
    call = traj.messages[2]["tool_calls"][0]["function"]
    assert json.loads(call["arguments"]) == {"bbox_2d": [0, 0, 312, 208]}  # 20x10 px of a 64x48 image
    assert "1000" in traj.messages[0]["content"]


def _text_planner(final: str) -> list[Step]:
    """A small model's replies in text mode: a JSON call, then the answer (city and country first)."""
    return [
        reply('```json\n{"name": "geocode", "arguments": {"address": "Avenue Gustave Eiffel, Paris"}}\n```'),
        reply(final),
    ]


async def _run_text(
    sample: Sample, planner: list[Step], out: Path, **config: Any
) -> tuple[dict[str, Any], Any]:
    with FakeOpenAIServer(_observer) as obs_srv, FakeOpenAIServer(planner) as plan_srv:
        async with (
            ChatClient("obs", obs_srv.base_url, max_retries=0) as obs,
            ChatClient("plan", plan_srv.base_url, max_retries=0) as plan,
        ):
            cfg = SynthesisConfig(tools=("image_zoom_in_tool", "geocode"), tool_calling="text", **config)
            report = await Synthesizer(cfg, registry(), obs, plan, out).run([sample])
        return report, plan_srv.chat_requests


async def test_text_mode_keeps_a_json_call_trajectory(tmp_path: Path, sample: Sample) -> None:
    CALLS.clear()
    answer = '{"city": "Paris", "country": "France", "lat": 48.8584, "lon": 2.2945}'
    report, requests = await _run_text(sample, _text_planner(answer), tmp_path / "s", constrained=True)
    assert report["kept"] == 1 and CALLS == [{"geocode": "Avenue Gustave Eiffel, Paris"}]
    first, second = (r.json for r in requests)
    assert "tools" not in first and "tools" not in second  # nothing native: tools are in the prompt
    system = first["messages"][0]["content"]
    assert "- geocode(address): Geocode an address." in system and "image_zoom_in_tool(bbox_2d)" in system
    example = [m["content"] for m in first["messages"][1:5]]
    assert example[1] == '{"name": "geocode", "arguments": {"address": "5020 Salzburg"}}'
    assert example[2].startswith("<tool_response>\n<<<TOOL OUTPUT geocode")
    assert "Temperate city" in first["messages"][5]["content"]
    # the first reply may only be a call; once a call was made, the answer is admitted too
    branches = [b["properties"] for b in first["response_format"]["schema"]["anyOf"]]
    assert [b["name"]["const"] for b in branches] == ["image_zoom_in_tool", "geocode"]
    assert second["response_format"]["schema"]["anyOf"][-1]["required"] == ["city", "country", "lat", "lon"]
    tool_turn = second["messages"][-1]
    assert tool_turn["role"] == "user" and tool_turn["content"].startswith("<tool_response>\n")
    assert '"lat": 48.8584' in tool_turn["content"]  # the real tool's output came back
    traj = Trajectory.model_validate_json((tmp_path / "s" / "trajectories.jsonl").read_text())
    call = traj.messages[2]["tool_calls"][0]["function"]
    assert call["name"] == "geocode" and json.loads(call["arguments"]) == {
        "address": "Avenue Gustave Eiffel, Paris"
    }
    assert "```" not in traj.messages[2]["content"] and '"name"' not in traj.messages[2]["content"]
    assert traj.messages[-1]["content"].endswith(
        '<answer>{"lat": 48.8584, "lon": 2.2945, "city": "Paris", "country": "France"}</answer>'
    )
    assert traj.metadata["synthesis"]["planner_tool_calling"] == "text"


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        (
            lambda: _text_planner('{"city": "Paris", "country": "France", "lat": 47.0, "lon": 2.2945}'),
            "too_far",
        ),
        (
            lambda: [reply('{"city": "Paris", "country": "France", "lat": 48.8584, "lon": 2.2945}')],
            "no_tool_call",
        ),
        (lambda: [reply('{"name": "geocode", "arguments": {"addr": 1}}')], "invalid_tool_call"),
        # the right point, but a region as the country: a wrong label would be taught as right
        (
            lambda: _text_planner(
                '{"city": "Paris", "country": "Ile-de-France", "lat": 48.8584, "lon": 2.2945}'
            ),
            "wrong_country",
        ),  # fmt: skip
    ],
)
async def test_text_mode_keeps_the_filters_standard(
    tmp_path: Path, sample: Sample, replies: Any, reason: str
) -> None:
    report, _ = await _run_text(sample, replies(), tmp_path / "s")
    assert report["kept"] == 0 and report["rejected"] == {reason: 1}


def test_cli_refuses_constraints_without_text_mode(tmp_path: Path, sample: Sample) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(sample.model_dump_json() + "\n")
    res = CliRunner().invoke(
        app,
        ["data", "synthesize", str(data), "-o", str(tmp_path / "o"), "--observer-model", "o",
         "--planner-model", "p", "--planner-constrained"],
    )  # fmt: skip
    assert res.exit_code == 1 and "--planner-tool-calling text" in res.output


async def test_geocoded_answers_ask_for_the_place_and_keep_the_5_km_check(
    tmp_path: Path, sample: Sample
) -> None:
    right = _text_planner('{"city": "Paris", "country": "France"}')
    report, requests = await _run_text(sample, right, tmp_path / "a", constrained=True, geocode_answers=True)
    assert report["kept"] == 1
    first = requests[0].json
    assert '{"city": "<city>", "country": "<country>"}' in first["messages"][0]["content"]
    assert first["messages"][4]["content"] == '{"city": "Salzburg", "country": "Austria"}'
    assert requests[1].json["response_format"]["schema"]["anyOf"][-1]["required"] == ["city", "country"]
    traj = Trajectory.model_validate_json((tmp_path / "a" / "trajectories.jsonl").read_text())
    assert traj.metadata["synthesis"]["coords_source"] == "geocoded"
    assert 3 < traj.metadata["synthesis"]["distance_km"] < 5  # the gazetteer's Paris, 4 km from the tower
    wrong = _text_planner('{"city": "Paris", "country": "United States"}')
    report, _ = await _run_text(sample, wrong, tmp_path / "b", geocode_answers=True)
    assert report["rejected"] == {"too_far": 1}


async def test_the_last_step_admits_only_the_answer(tmp_path: Path, sample: Sample) -> None:
    answer = '{"city": "Paris", "country": "France", "lat": 48.8584, "lon": 2.2945}'
    report, requests = await _run_text(
        sample, _text_planner(answer), tmp_path / "s", constrained=True, max_steps=2
    )
    assert report["kept"] == 1
    first, last = (r.json["response_format"]["schema"]["anyOf"] for r in requests)
    assert all("name" in b["properties"] for b in first)  # a call first: no answer yet
    assert [b["required"] for b in last] == [["city", "country", "lat", "lon"]]  # budget spent: answer


async def test_an_answer_naming_another_country_than_the_samples_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "q.png"
    Image.new("RGB", (64, 48)).save(path)
    labelled = Sample(id="s/2", image=str(path), lat=48.8584, lon=2.2945, labels={"country": "FR"})
    answer = '{"city": "Paris", "country": "Belgium", "lat": 48.8584, "lon": 2.2945}'
    report, _ = await _run_text(labelled, _text_planner(answer), tmp_path / "s")
    assert report["rejected"] == {"wrong_country": 1}
    right = _text_planner('{"city": "Paris", "country": "Frankreich", "lat": 48.8584, "lon": 2.2945}')
    report, _ = await _run_text(labelled, right, tmp_path / "t")
    assert report["kept"] == 1  # any name of the sample's country
