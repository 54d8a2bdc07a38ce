"""Units: text tool-call parsing, image loading errors, prompts, trajectory files and export."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from agent_helpers import bomb_png
from PIL import Image

from geosleuth.agent import (
    available_styles,
    load_style,
    read_trajectories,
    to_openai_chat,
    write_trajectories,
)
from geosleuth.agent.images import ImageInputError, fit_to_budget, load_image
from geosleuth.agent.prompting import build_prompts
from geosleuth.agent.toolcalls import decode_arguments, parse_text_calls
from geosleuth.core.records import Task, ToolCallRecord, Trajectory, Turn

KNOWN = {"image_zoom_in_tool", "web_search"}


def test_tagged_calls_including_an_unclosed_last_block() -> None:
    text = (
        "<think>zoom</think>"
        '<tool_call>{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [1, 2, 3, 4]}}</tool_call>\n'
        "<tool_call>{'name': 'web_search', 'arguments': {'query': 'Bäckerei Frey',}}"
    )
    calls = parse_text_calls(text, KNOWN)
    assert [(c.name, c.arguments, c.error) for c in calls] == [
        ("image_zoom_in_tool", {"bbox_2d": [1, 2, 3, 4]}, None),
        ("web_search", {"query": "Bäckerei Frey"}, None),
    ]


def test_call_style_only_for_known_tools() -> None:
    text = (
        'I will call web_search(query="Zürich Bahnhof") now.\n'
        'web_search(query="Zürich Bahnhof", max_results=5)\nprint(x=1)'
    )
    calls = parse_text_calls(text, KNOWN)
    assert [(c.name, c.arguments) for c in calls] == [
        ("web_search", {"query": "Zürich Bahnhof", "max_results": 5})
    ]
    tagged = parse_text_calls("<tool_call>image_zoom_in_tool(bbox_2d=[0, 0, 10, 10])</tool_call>", KNOWN)
    assert tagged[0].arguments == {"bbox_2d": [0, 0, 10, 10]}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ('{"bbox_2d": [1, 2', "not valid JSON"),
        ("[1, 2, 3]", "must be a JSON object"),
        ("just a string", 'must be a JSON object of the tool\'s parameters by name, such as {"query"'),
        ('"just a string"', "got the text 'just a string'"),  # a JSON string is not the object expected
        ("42", "got a number: 42"),
        ('"{\\"q\\": 1}"', None),  # double-encoded JSON is accepted
    ],
)
def test_decode_arguments(raw: str, message: str | None) -> None:
    args, err = decode_arguments(raw)
    if message is None:
        assert args == {"q": 1} and err is None
    else:
        assert args is None and message in (err or "")


def test_tool_call_block_without_name_is_an_error() -> None:
    (call,) = parse_text_calls('<tool_call>{"arguments": {}}</tool_call>', KNOWN)
    assert call.error and "name" in call.error


def test_image_errors_are_clear(tmp_path: Path) -> None:
    zero = tmp_path / "zero.jpg"
    zero.write_bytes(b"")
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    good = tmp_path / "good.jpg"
    Image.new("RGB", (400, 300), "white").save(good)
    truncated = tmp_path / "truncated.jpg"
    truncated.write_bytes(good.read_bytes()[:400])
    cases = {
        tmp_path / "missing.jpg": "file not found",
        zero: "empty (0 bytes)",
        text: "not a supported image format",
        truncated: "damaged or truncated",
        bomb_png(tmp_path / "bomb.png"): "decompression bomb",
    }
    for path, message in cases.items():
        with pytest.raises(ImageInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
            load_image(path)
    assert load_image(good).size == (400, 300)


def test_fit_to_budget_keeps_aspect_and_budget() -> None:
    small, scale = fit_to_budget(Image.new("RGB", (4000, 1000)), 1_000_000)
    assert small.width * small.height <= 1_000_000 and scale == pytest.approx(small.width / 4000)
    assert abs(small.width / small.height - 4) < 0.01
    same, one = fit_to_budget(Image.new("RGB", (100, 100)), 1_000_000)
    assert one == 1.0 and same.size == (100, 100)


def test_every_style_renders_tools_and_task_without_placeholders() -> None:
    schema = {
        "type": "function",
        "function": {
            "name": "image_zoom_in_tool",
            "description": "zoom",
            "parameters": {"properties": {"bbox_2d": {}}},
        },
    }
    task = Task(id="t", choices=["France", "Italy"], hint="Europe", answer_level="city")
    assert set(available_styles()) == {
        "geovista",
        "thinking_with_map",
        "spotagent",
        "direct",
        "geoagent",
        "geoguessr_map",
    }
    for name in available_styles():
        style = load_style(name)
        for mode in ("text", "native"):
            system, user = build_prompts(style, task, [schema], mode, "relative1000", (800, 600))
            assert "{{" not in system + user
            assert "image_zoom_in_tool" in system and "0 to 1000" in system
            assert "A. France" in user and "Hint: Europe" in user and "city level" in user
    bare_system, _ = build_prompts(load_style("direct"), Task(id="t"), [], "native", "absolute", (800, 600))
    assert "Tools" not in bare_system and "tool_response" not in bare_system
    with pytest.raises(ValueError, match="choose one of direct"):
        load_style("nope")


def test_trajectory_jsonl_roundtrip_and_openai_export(tmp_path: Path) -> None:
    img_rel = "images/s1/t0_c0_0.png"
    (tmp_path / "images/s1").mkdir(parents=True)
    Image.new("RGB", (8, 8), "red").save(tmp_path / img_rel)
    traj = Trajectory(
        sample_id="s1",
        model="m",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "image_url", "image_url": {"url": img_rel}},
                    {"type": "text", "text": "hi"},
                ],
            },
            {"role": "assistant", "content": "done"},
        ],
        turns=[Turn(index=0, text="done", tool_calls=[ToolCallRecord(name="x", result_images=[img_rel])])],
        metadata={"tool_schemas": [{"type": "function", "function": {"name": "x"}}]},
    )
    path = tmp_path / "trajectories.jsonl"
    assert write_trajectories(path, [traj, traj]) == 2
    back = list(read_trajectories(path))
    assert len(back) == 2 and back[0] == traj
    plain = to_openai_chat(back[0])
    assert (
        plain["messages"][0]["content"][0]["image_url"]["url"] == img_rel
        and plain["tools"][0]["function"]["name"] == "x"
    )
    embedded = to_openai_chat(back[0], base_dir=tmp_path, embed_images=True)
    url = embedded["messages"][0]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    assert base64.b64decode(url.split(",", 1)[1]) == (tmp_path / img_rel).read_bytes()
    path.write_text("{not json}\n")
    with pytest.raises(ValueError, match="trajectories.jsonl:1"):
        list(read_trajectories(path))


def test_export_refuses_to_embed_an_image_that_was_never_saved() -> None:
    part = {"type": "image_url", "image_url": {"url": "unsaved:images/s/t0_c0_0.png"}}
    traj = Trajectory(sample_id="s", model="m", messages=[{"role": "user", "content": [part]}])
    assert to_openai_chat(traj)["messages"][0]["content"][0] == part
    with pytest.raises(ValueError, match="was not saved"):
        to_openai_chat(traj, embed_images=True)


@pytest.mark.parametrize("mode", ["CMYK", "I", "F", "PA"])
def test_png_encoding_accepts_any_decoded_mode(tmp_path: Path, mode: str) -> None:
    """image_format=PNG with a CMYK JPEG used to raise OSError and abort the whole batch."""
    from geosleuth.agent.images import prepare_image
    from geosleuth.agent.trajectory import ImageStore

    img = Image.new(mode, (40, 30))
    prepared = prepare_image(img, 0, "PNG")
    assert prepared.data_url.startswith("data:image/png;base64,")
    ref = ImageStore(tmp_path, "s", 0, "PNG").add(img, "t0")
    assert Image.open(tmp_path / ref).size == (40, 30)


def test_native_calls_get_ids_unique_within_the_turn() -> None:
    from geosleuth.agent.client import RawToolCall
    from geosleuth.agent.toolcalls import parse_native

    calls = [RawToolCall("", "a", "{}"), RawToolCall("x", "b", "{}"), RawToolCall("x", "c", "{}")]
    assert [c.id for c in parse_native(calls)] == ["call_0", "x", "call_2"]
    clash = [RawToolCall("call_1", "a", "{}"), RawToolCall("call_1", "b", "{}")]
    assert [c.id for c in parse_native(clash)] == ["call_1", "call_1_"]


def test_call_style_spanning_lines_and_parentheses_in_strings() -> None:
    tools = {"geocode", "image_zoom_in_tool"}
    multi = parse_text_calls('Let me look.\ngeocode(\n  address="Main St (north), Springfield",\n)\n', tools)
    assert [(c.name, c.arguments, c.error) for c in multi] == [
        ("geocode", {"address": "Main St (north), Springfield"}, None)
    ]
    box = parse_text_calls("`image_zoom_in_tool(bbox_2d=[1, 2,\n    3, 4])`", tools)
    assert box[0].arguments == {"bbox_2d": [1, 2, 3, 4]}
    assert parse_text_calls('geocode(address="x") because the sign says so', tools) == []
    (bad,) = parse_text_calls("geocode(address=foo)", tools)
    assert bad.arguments is None and "literal values" in (bad.error or "")
