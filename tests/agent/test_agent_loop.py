"""The loop end to end against the scripted server: requests sent and trajectories recorded."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agent_helpers import decode_data_url, image_parts, make_config, text_of

from geosleuth.agent import run_task
from geosleuth.core.records import Task, TrajectoryStatus
from geosleuth.testing import FakeOpenAIServer, delay, error, reply, tool_call
from geosleuth.tools.base import ToolContext, ToolRegistry, tool

ANSWER_JSON = '{"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"}'
ANSWER_TAGS = "<answer>\nCountry: Switzerland\nCity: Zürich\nLatitude: 47.3769\nLongitude: 8.5417\n</answer>"


def task(image: Path) -> Task:
    return Task(id="img-1", image=str(image))


async def test_native_tool_call_then_json_answer(
    query_image: Path, registry: ToolRegistry, tmp_path: Path
) -> None:
    script = [
        reply(
            "Let me zoom.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [100, 100, 600, 400]})]
        ),
        reply(f"The sign says Zürich. {ANSWER_JSON}"),
    ]
    out = tmp_path / "run"
    async with FakeOpenAIServer(script) as server:
        cfg = make_config(
            server.base_url, prompt_style="thinking_with_map", tools=None, bbox_convention="absolute"
        )
        traj = await run_task(task(query_image), cfg, artifacts_dir=out, registry=registry)

    first, second = (r.json for r in server.chat_requests)
    # the query image is sent once, downscaled to the 2 M pixel budget, scale recorded
    (img_part,) = image_parts(first["messages"][1])
    sent = decode_data_url(img_part["image_url"]["url"])
    assert sent.width * sent.height <= 2_000_000 and sent.width > 1500
    assert traj.image_scale == pytest.approx(sent.width / 3000, abs=1e-3)
    # native mode: tool schemas in the request, rendered from the registry
    assert [t["function"]["name"] for t in first["tools"]] == registry.names()
    assert "bbox_2d" in first["tools"][0]["function"]["parameters"]["properties"]
    # observation: a tool message for the call id, the crop in a user message wrapped in <tool_response>
    assistant, tool_msg, user_msg = second["messages"][2:5]
    call_id = assistant["tool_calls"][0]["id"]
    assert tool_msg == {"role": "tool", "tool_call_id": call_id, "content": "(1 image(s))"}
    assert user_msg["role"] == "user" and text_of(user_msg).startswith("<tool_response>")
    assert text_of(user_msg).rstrip().endswith("</tool_response>")
    crop = decode_data_url(image_parts(user_msg)[0]["image_url"]["url"])
    assert abs(crop.width - 500 / traj.image_scale) <= 2 and abs(crop.height - 300 / traj.image_scale) <= 2
    # the trajectory records everything
    assert traj.status is TrajectoryStatus.OK
    assert (
        traj.prediction and traj.prediction.city == "Zürich" and traj.prediction.lat == pytest.approx(47.3769)
    )
    (call,) = traj.tool_calls
    assert (
        call.name == "image_zoom_in_tool" and call.ok and call.arguments == {"bbox_2d": [100, 100, 600, 400]}
    )
    assert (out / call.result_images[0]).exists()
    assert [t.usage.total_tokens for t in traj.turns] == [15, 15]
    assert traj.messages[-1] == {"role": "assistant", "content": f"The sign says Zürich. {ANSWER_JSON}"}


async def test_text_tool_calls_are_wrapped_in_a_user_tool_response(
    query_image: Path, registry: ToolRegistry
) -> None:
    script = [
        reply(
            "<think>the sign</think>\n<tool_call>\n"
            '{"name": "geocode", "arguments": {"address": "Zürich HB"}}\n</tool_call>'
        ),
        reply(ANSWER_TAGS),
    ]
    async with FakeOpenAIServer(script) as server:
        traj = await run_task(
            task(query_image), make_config(server.base_url, prompt_style="spotagent"), registry=registry
        )
    first, second = (r.json for r in server.chat_requests)
    assert "tools" not in first  # text mode: schemas live in the system prompt
    assert (
        '"name": "geocode"' in first["messages"][0]["content"]
        and "<tools>" in first["messages"][0]["content"]
    )
    observation = second["messages"][-1]
    assert observation["role"] == "user"
    assert (
        text_of(observation)
        == '<tool_response>\n{"address": "Zürich HB", "lat": 47.3769, "lon": 8.5417}\n</tool_response>'
    )
    assert traj.status is TrajectoryStatus.OK and traj.prediction and traj.prediction.country == "Switzerland"
    assert traj.tool_calls[0].arguments == {"address": "Zürich HB"}


async def test_call_style_and_several_calls_run_concurrently(
    query_image: Path, registry: ToolRegistry, slow_spans: list[tuple[float, float]]
) -> None:
    script = [
        reply('slow_lookup(query="a")\nslow_lookup(query="b")\nslow_lookup(query="c")'),
        reply(ANSWER_JSON),
    ]
    async with FakeOpenAIServer(script) as server:
        traj = await run_task(task(query_image), make_config(server.base_url), registry=registry)
    calls = traj.tool_calls
    assert [c.result_text for c in calls] == ["result for a", "result for b", "result for c"]
    assert all(c.latency_s >= 0.19 for c in calls)
    # all three ran at once: the last started before the first ended
    assert len(slow_spans) == 3 and max(b for b, _ in slow_spans) < min(e for _, e in slow_spans)


@pytest.mark.parametrize(
    ("bad_output", "expected_error"),
    [
        ('<tool_call>{"name": "geocode", "arguments": {"address": "Zür</tool_call>', "not valid JSON"),
        (
            '<tool_call>{"name": "image_zoom_in_tool", '
            '"arguments": {"bbox_2d": [600, 400, 100, 100]}}</tool_call>',
            "invalid bbox",
        ),
        (
            '<tool_call>{"name": "street_view", "arguments": {"pano": 1}}</tool_call>',
            "unknown tool 'street_view'",
        ),
        (
            '<tool_call>{"name": "geocode", "arguments": {"addr": 3}}</tool_call>',
            "invalid arguments for geocode",
        ),
    ],
)
async def test_bad_calls_become_error_observations(
    query_image: Path, registry: ToolRegistry, bad_output: str, expected_error: str
) -> None:
    async with FakeOpenAIServer([reply(bad_output), reply(ANSWER_TAGS)]) as server:
        traj = await run_task(task(query_image), make_config(server.base_url), registry=registry)
    (call,) = traj.tool_calls
    assert not call.ok and expected_error in (call.error or "")
    observation = text_of(server.chat_requests[1].json["messages"][-1])
    assert expected_error in observation and observation.startswith("<tool_response>")
    assert traj.status is TrajectoryStatus.OK  # the model recovered and answered


async def test_native_malformed_arguments_are_reported_with_the_call_id(
    query_image: Path, registry: ToolRegistry
) -> None:
    script = [
        reply(None, tool_calls=[tool_call("geocode", '{"address": ', call_id="c1")]),
        reply(ANSWER_JSON),
    ]
    async with FakeOpenAIServer(script) as server:
        cfg = make_config(server.base_url, prompt_style="thinking_with_map")
        traj = await run_task(task(query_image), cfg, registry=registry)
    tool_msg = server.chat_requests[1].json["messages"][3]
    assert (
        tool_msg["role"] == "tool"
        and tool_msg["tool_call_id"] == "c1"
        and "not valid JSON" in tool_msg["content"]
    )
    assert traj.tool_calls[0].arguments == {"_raw": '{"address": '} and traj.status is TrajectoryStatus.OK


async def test_never_answering_model_gets_one_reminder(query_image: Path, registry: ToolRegistry) -> None:
    async with FakeOpenAIServer(default=reply("I am still thinking about the vegetation.")) as server:
        traj = await run_task(task(query_image), make_config(server.base_url), registry=registry)
    assert len(server.chat_requests) == 2
    assert "neither a tool call nor a final answer" in server.chat_requests[1].json["messages"][-1]["content"]
    assert traj.turns[0].note == "reminder sent"
    assert traj.status is TrajectoryStatus.PARSE_FAILED and traj.prediction and not traj.prediction.has_coords


async def test_endless_tool_calls_hit_the_turn_budget_after_a_nudge(
    query_image: Path, registry: ToolRegistry
) -> None:
    looping = reply('<tool_call>{"name": "geocode", "arguments": {"address": "x"}}</tool_call>')
    async with FakeOpenAIServer(default=looping) as server:
        traj = await run_task(task(query_image), make_config(server.base_url, max_turns=3), registry=registry)
    assert len(server.chat_requests) == 3 and len(traj.turns) == 3
    assert "final answer now" in text_of(server.chat_requests[2].json["messages"][-1])
    assert traj.turns[1].note == "final-answer nudge"
    assert traj.status is TrajectoryStatus.BUDGET_EXHAUSTED and "turn budget of 3" in (traj.error or "")
    assert not traj.turns[2].tool_calls[0].ok  # the over-budget call was recorded, not run


async def test_token_budget_nudges_then_stops(query_image: Path, registry: ToolRegistry) -> None:
    looping = reply('<tool_call>{"name": "geocode", "arguments": {"address": "x"}}</tool_call>')  # 15 tokens
    async with FakeOpenAIServer(default=looping) as server:
        cfg = make_config(server.base_url, max_total_tokens=40)
        traj = await run_task(task(query_image), cfg, registry=registry)
    assert len(traj.turns) == 3 and traj.turns[1].note == "final-answer nudge"
    assert "30 of 40 tokens used" in text_of(server.chat_requests[2].json["messages"][-1])
    assert traj.status is TrajectoryStatus.BUDGET_EXHAUSTED and "token budget of 40" in (traj.error or "")


async def test_per_tool_and_total_call_limits(query_image: Path, registry: ToolRegistry) -> None:
    two_calls = reply(
        '<tool_call>{"name": "geocode", "arguments": {"address": "a"}}</tool_call>'
        '<tool_call>{"name": "geocode", "arguments": {"address": "b"}}</tool_call>'
    )
    async with FakeOpenAIServer([two_calls, reply(ANSWER_JSON)]) as server:
        cfg = make_config(server.base_url, tool_call_limits={"geocode": 1})
        traj = await run_task(task(query_image), cfg, registry=registry)
    assert [c.ok for c in traj.tool_calls] == [True, False]
    assert "at most 1 times" in (traj.tool_calls[1].error or "")


async def test_model_errors_and_retries(query_image: Path, registry: ToolRegistry) -> None:
    async with FakeOpenAIServer([error(429), reply(ANSWER_JSON)]) as server:
        ok = await run_task(task(query_image), make_config(server.base_url), registry=registry)
    assert ok.status is TrajectoryStatus.OK and len(server.chat_requests) == 2
    async with FakeOpenAIServer(default=error(500, "engine died")) as server:
        failed = await run_task(task(query_image), make_config(server.base_url), registry=registry)
    assert failed.status is TrajectoryStatus.MODEL_ERROR and "engine died" in (failed.error or "")
    assert failed.prediction is None


async def test_wall_clock_timeout(query_image: Path, registry: ToolRegistry) -> None:
    async with FakeOpenAIServer([delay(30.0, reply(ANSWER_JSON))]) as server:
        start = time.perf_counter()
        traj = await run_task(
            task(query_image), make_config(server.base_url, timeout_s=0.5), registry=registry
        )
    assert time.perf_counter() - start < 10.0  # cut at 0.5 s; without the deadline, 30 s
    assert traj.status is TrajectoryStatus.TIMEOUT and "0.5 s" in (traj.error or "")


@pytest.mark.parametrize(
    "answer",
    [
        ANSWER_JSON,
        ANSWER_TAGS,
        "<think>Swiss German, tram wires.</think>\n" + ANSWER_TAGS,
        "<answer>Switzerland; Zürich; 47.3769; 8.5417</answer>",
        "```json\n"
        + json.dumps({"lat": 47.3769, "lon": 8.5417, "city": "Zürich", "country": "Switzerland"})
        + "\n```",
        "Final answer: 47.3769, 8.5417 (Zürich, Switzerland)",
    ],
)
async def test_answer_formats(query_image: Path, answer: str) -> None:
    async with FakeOpenAIServer([reply(answer)]) as server:
        traj = await run_task(task(query_image), make_config(server.base_url, prompt_style="direct"))
    assert "tools" not in server.chat_requests[0].json
    assert traj.status is TrajectoryStatus.OK and traj.prediction
    assert traj.prediction.lat == pytest.approx(47.3769) and traj.prediction.lon == pytest.approx(8.5417)


async def test_tool_role_setting_puts_images_in_the_tool_message(
    query_image: Path, registry: ToolRegistry
) -> None:
    script = [
        reply(None, tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 50, 50]})]),
        reply(ANSWER_JSON),
    ]
    async with FakeOpenAIServer(script) as server:
        cfg = make_config(
            server.base_url,
            prompt_style="thinking_with_map",
            tool_result_role="tool",
            bbox_convention="absolute",
        )
        await run_task(task(query_image), cfg, registry=registry)
    last = server.chat_requests[1].json["messages"][-1]
    assert last["role"] == "tool" and len(image_parts(last)) == 1


async def test_bad_image_is_an_input_error_not_an_exception(tmp_path: Path) -> None:
    async with FakeOpenAIServer([reply(ANSWER_JSON)]) as server:
        cfg = make_config(server.base_url, prompt_style="direct")
        traj = await run_task(Task(id="x", image=str(tmp_path / "missing.jpg")), cfg)
    assert traj.status is TrajectoryStatus.INPUT_ERROR and "file not found" in (traj.error or "")
    assert not server.chat_requests


async def test_model_given_as_url_uses_the_servers_first_model(query_image: Path) -> None:
    async with FakeOpenAIServer([reply(ANSWER_JSON)], model="served-model") as server:
        cfg = make_config(None, model=server.base_url, prompt_style="direct")  # type: ignore[arg-type]
        traj = await run_task(task(query_image), cfg)
    assert traj.model == "served-model" and server.chat_requests[0].json["model"] == "served-model"


async def test_real_zoom_tool_relative_boxes_and_inverted_box(query_image: Path) -> None:
    calls = [
        tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 500]}),
        tool_call("image_zoom_in_tool", {"bbox_2d": [500, 500, 100, 100]}),
    ]
    async with FakeOpenAIServer([reply(None, tool_calls=calls), reply(ANSWER_JSON)]) as server:
        cfg = make_config(server.base_url, prompt_style="thinking_with_map", tools=["image_zoom_in_tool"])
        traj = await run_task(task(query_image), cfg)
    system = server.chat_requests[0].json["messages"][0]["content"]
    assert "relative coordinates from 0 to 1000" in system
    good, inverted = traj.tool_calls
    assert good.ok and len(good.result_images) == 1
    assert not inverted.ok and "inverted" in (inverted.error or "")
    tool_messages = [m for m in server.chat_requests[1].json["messages"] if m["role"] == "tool"]
    assert len(tool_messages) == 2 and "inverted" in tool_messages[1]["content"]


async def test_multiple_choice_task(query_image: Path) -> None:
    choice_task = Task(
        id="mc", image=str(query_image), answer_type="choice", choices=["France", "Switzerland"]
    )
    async with FakeOpenAIServer([reply('{"choice": "B", "country": "Switzerland"}')]) as server:
        traj = await run_task(choice_task, make_config(server.base_url, prompt_style="direct"))
    user_text = text_of(server.chat_requests[0].json["messages"][1])
    assert "A. France" in user_text and "B. Switzerland" in user_text
    assert traj.status is TrajectoryStatus.OK and traj.prediction and traj.prediction.choice == "B"


async def test_many_tasks_share_one_client(tmp_path: Path, registry: ToolRegistry) -> None:
    from PIL import Image

    from geosleuth.agent import run_tasks

    small = tmp_path / "small.png"
    Image.new("RGB", (64, 48), "green").save(small)

    def script(request: dict) -> object:
        if sum(m["role"] == "assistant" for m in request["messages"]) == 0:
            return reply('<tool_call>{"name": "geocode", "arguments": {"address": "x"}}</tool_call>')
        return reply(ANSWER_JSON)

    tasks = [Task(id=f"t{i}", image=str(small)) for i in range(48)]
    async with FakeOpenAIServer(script) as server:
        out = await run_tasks(tasks, make_config(server.base_url), concurrency=48, registry=registry)
    assert [t.sample_id for t in out] == [t.id for t in tasks]
    assert all(t.status is TrajectoryStatus.OK and len(t.turns) == 2 for t in out)
    assert len(server.chat_requests) == 96


async def test_answer_without_coordinates_is_geocoded_when_asked(query_image: Path) -> None:
    answer = "<answer>\nCountry: Switzerland\nCity: Luzern\n</answer>"
    async with FakeOpenAIServer(default=reply(answer)) as server:
        plain = await run_task(task(query_image), make_config(server.base_url, prompt_style="direct"))
        cfg = make_config(server.base_url, prompt_style="direct", geocode_answers=True)
        geocoded = await run_task(task(query_image), cfg)
    assert plain.status is TrajectoryStatus.OK and plain.prediction and not plain.prediction.has_coords
    pred = geocoded.prediction
    assert pred and pred.coords_source == "geocoded" and pred.lat == pytest.approx(47.05, abs=0.1)
    assert pred.lon == pytest.approx(8.31, abs=0.1)


async def test_images_snapped_to_the_processor_frame_with_resize_factor(query_image: Path) -> None:
    seen: list[tuple[int, int] | None] = []

    @tool
    def image_zoom_in_tool(bbox_2d: list[float], ctx: ToolContext) -> str:
        """Record the frame the tool maps boxes from.

        Args:
            bbox_2d: [x1, y1, x2, y2].
        """
        seen.append(ctx.model_size)
        return "ok"

    script = [
        reply("Zoom.", tool_calls=[tool_call("image_zoom_in_tool", {"bbox_2d": [0, 0, 10, 10]})]),
        reply(ANSWER_JSON),
    ]
    async with FakeOpenAIServer(script) as server:
        cfg = make_config(
            server.base_url, prompt_style="thinking_with_map", bbox_convention="absolute", resize_factor=28
        )
        traj = await run_task(task(query_image), cfg, registry=ToolRegistry([image_zoom_in_tool]))
    first = server.chat_requests[0].json
    sent = decode_data_url(image_parts(first["messages"][1])[0]["image_url"]["url"])
    # 3000x2000 under a 2 M budget, sides on Qwen2.5-VL's 28 px grid: the processor leaves it as is
    assert sent.size == (1708, 1148) and sent.width % 28 == 0 and sent.height % 28 == 0
    assert "1708" in first["messages"][0]["content"] and seen == [(1708, 1148)]
    assert traj.status is TrajectoryStatus.OK and traj.image_scale == pytest.approx(1708 / 3000)
