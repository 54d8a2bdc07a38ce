"""The `geosleuth_tools` multi-turn scheduler, driven by ms-swift 4.6's own colocate loop.

The plugin file is loaded with ms-swift's ``import_external_file`` (what ``--external_plugins``
does); the scheduler is built as ms-swift's trainer builds it (``multi_turns[name](max_turns=…,
tokenizer=…, template=…)``); a row written by ``export-swift`` becomes a request through
ms-swift's ``GRPOSample.to_infer_request`` (as under a multi-turn scheduler); and
``run_multi_turn`` drives the rollout. Only the inference is scripted: ``rollout_fn`` answers
each request with the script's next completion in ms-swift's own response classes. ms-swift
runs in a subprocess with ``.swift-deps`` on its path (its pins conflict with the venv's TRL).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_training_swift import PLUGIN, SWIFT_DEPS, write_swift_dataset

DRIVER = r"""
import json, sys, time, types
import torch
from swift.utils import import_external_file
import_external_file(sys.argv[1])
from swift.infer_engine.protocol import (ChatCompletionResponse, ChatCompletionResponseChoice, ChatMessage,
                                         RequestConfig, RolloutOutput, UsageInfo)
from swift.rl_core.data import GRPOSample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func
from swift.rlhf_trainers.utils import resolve_reward_funcs
from swift.rollout import multi_turns
from swift.rollout.agent_loop import run_multi_turn
from swift.template.vision_utils import load_image
from geosleuth.training.swift.scheduler import register_scheduler
import test_training_trl_tools as helpers

row = json.loads(open(sys.argv[2]).read().splitlines()[0])
scripts = json.loads(sys.argv[3])
plugin_cls = multi_turns["geosleuth_tools"]
plugin_sched = plugin_cls(max_turns=8, tokenizer=None, template=None)  # as ms-swift's trainer builds it
slow = helpers.registry().get("slow_lookup").schema()
row["tools"] = json.dumps(json.loads(row["tools"]) + [slow])
factory = "test_training_trl_tools:registry"
register_scheduler("geo_test", registry_factory=factory, timeout_s=1.0, max_tool_calls=3)
sched = multi_turns["geo_test"](max_turns=8, tokenizer=None, template=None)
import asyncio
from geosleuth.training.verl.tools import shared_registry
warm = shared_registry(None, "test_training_trl_tools:registry")
asyncio.run(warm.call("geocode", {"address": "Paris"}, None))  # the gazetteer loads once, untimed

def reply(text):
    choice = ChatCompletionResponseChoice(index=0, message=ChatMessage(role="assistant", content=text),
                                          finish_reason="stop")
    return RolloutOutput(response=ChatCompletionResponse(model="scripted", choices=[choice],
                                                         usage=UsageInfo(0, 0, 0)))

out = {"plugin_tools": plugin_sched.turns.tools, "rollouts": {}}
funcs, names = resolve_reward_funcs(["geo_step"], args=types.SimpleNamespace())
for name, script in scripts.items():
    requests = [GRPOSample.from_row(json.loads(json.dumps(row))).to_infer_request(include_extra=True)]
    def rollout_fn(reqs, cfg, script=script):
        turn = lambda r: min(sum(m["role"] == "tool" for m in r.messages), len(script) - 1)
        return [reply(script[turn(r)]) for r in reqs]
    cfg = RequestConfig(max_tokens=64)
    cpu = time.process_time()
    (result,) = run_multi_turn(requests, rollout_fn(requests, cfg), sched, rollout_fn, cfg, max_turns=8)
    cpu = time.process_time() - cpu
    sample = GRPOSample.from_row({**row, "messages": result.messages})
    reward = compute_rewards_per_func([sample], funcs, None, device=torch.device("cpu")).tolist()[0][0]
    images = [load_image(i).size for i in requests[0].images]
    out["rollouts"][name] = {"messages": result.messages, "infos": result.rollout_infos, "images": images,
                             "reward": reward, "cpu_s": cpu}
print(json.dumps(out, default=str))
"""

ANSWER = '<answer>{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}</answer>'


def call(name: str, arguments: str) -> str:
    return f'<think>Next.</think>\n<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


GEOCODE = call("geocode", '{"address": "Paris, France"}')
ZOOM = call("image_zoom_in_tool", '{"bbox_2d": [0, 0, 500, 350]}')
SCRIPTS = {
    "text_first": [GEOCODE, ZOOM, ANSWER],
    "image_first": [ZOOM, GEOCODE, ANSWER],
    "bad": [
        call("teleport", '{"to": "Paris"}'),
        call("image_zoom_in_tool", '{"bbox_2d": [5000, 5000, 9000, 9000]}'),
        call("slow_lookup", '{"query": "Paris"}'),
        '<tool_call>\n{"name": "geocode", "arguments": {"address": </tool_call>',
        ANSWER,
    ],
    "over_budget": [ZOOM, GEOCODE, ZOOM, ZOOM, ZOOM],
    "answer_and_call": [ANSWER + "\n" + GEOCODE],
}


@pytest.fixture(scope="module")
def swift_run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    if not (SWIFT_DEPS / "swift" / "rollout").is_dir():
        pytest.skip("ms-swift 4.x not installed in .swift-deps (scripts/test.sh installs it)")
    data = write_swift_dataset(tmp_path_factory.mktemp("swift"))
    here = Path(__file__).parent
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SWIFT_DEPS), str(here), os.environ.get("PYTHONPATH", "")]),
        "GEOSLEUTH_TOOL_CACHE_MODE": "off",
    }
    run = subprocess.run(
        [sys.executable, "-c", DRIVER, str(PLUGIN), str(data), json.dumps(SCRIPTS)],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-4000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("order", ["text_first", "image_first"])
def test_tool_rollout_through_ms_swifts_multi_turn_loop(swift_run: dict, order: str) -> None:
    out = swift_run["rollouts"][order]
    messages = out["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    geocoded, zoomed = (messages[3], messages[5]) if order == "text_first" else (messages[5], messages[3])
    assert "Paris" in geocoded["content"] and "Error" not in geocoded["content"]
    assert zoomed["content"].startswith("<image>") and "Zoomed-in view" in zoomed["content"]
    # the crop is the request's second image, loadable by ms-swift's own loader
    assert len(out["images"]) == 2 and out["images"][1][0] >= 100
    assert messages[-1]["content"] == ANSWER and out["reward"] == pytest.approx(1.0)
    assert (
        out["infos"]["tool_calls"] == 2
        and out["infos"]["tool_errors"] == 0
        and out["infos"]["num_turns"] == 3
    )


@pytest.mark.slow
def test_bad_calls_become_errors_the_policy_reads(swift_run: dict) -> None:
    out = swift_run["rollouts"]["bad"]
    tools = [m["content"] for m in out["messages"] if m["role"] == "tool"]
    assert len(tools) == 4 and out["messages"][-1]["content"] == ANSWER  # the rollout went on to the answer
    assert "unknown tool 'teleport'" in tools[0]
    assert "outside the image" in tools[1]
    assert "slow_lookup timed out after 1 s" in tools[2]
    assert "not valid JSON" in tools[3]
    assert out["infos"]["tool_errors"] == 4 and out["reward"] == pytest.approx(1.0)


@pytest.mark.slow
def test_tool_budget_is_enforced(swift_run: dict) -> None:
    out = swift_run["rollouts"]["over_budget"]
    tools = [m["content"] for m in out["messages"] if m["role"] == "tool"]
    # max_tool_calls=3: three calls run, the fourth is refused, the fifth ends the trajectory
    assert len(tools) == 4 and "budget of 3 calls is spent" in tools[3]
    assert out["infos"]["tool_calls"] == 3 and out["infos"]["num_turns"] == 5
    assert out["reward"] == 0.0  # no answer


@pytest.mark.slow
def test_plugin_registers_geosleuth_tools_without_the_answer_reading_tool(swift_run: dict) -> None:
    tools = swift_run["plugin_tools"]
    assert "image_zoom_in_tool" in tools and "geocode" in tools and "exif_gps" not in tools


def test_tool_turns_budget_errors_and_query_images(tmp_path: Path) -> None:
    """The engine-neutral part, without ms-swift: budget, bad calls, the photo as path or base64."""
    import asyncio
    import base64
    import io

    from PIL import Image
    from test_training_trl_tools import registry

    from geosleuth.tools.base import ToolContext
    from geosleuth.training.swift.scheduler import ToolTurns, offered_tools, query_image

    photo = Image.new("RGB", (200, 100), (3, 4, 5))
    photo.save(tmp_path / "p.png")
    buf = io.BytesIO()
    photo.save(buf, format="PNG")
    encoded = base64.b64encode(buf.getvalue()).decode()
    for source in (str(tmp_path / "p.png"), encoded, "data:image/png;base64," + encoded):
        img = query_image(source)
        assert img is not None and img.size == (200, 100)
    assert query_image("not-a-file-and-not-base64!") is None and query_image(None) is None
    assert offered_tools('[{"type": "function", "function": {"name": "geocode"}}]') == ["geocode"]
    assert offered_tools(None) is None

    turns = ToolTurns(registry(), ["image_zoom_in_tool", "geocode"], max_tool_calls=1, timeout_s=5)
    ctx = ToolContext(image=photo)
    two = call("image_zoom_in_tool", '{"bbox_2d": [0, 0, 100, 50]}') + call(
        "image_zoom_in_tool", '{"bbox_2d": [0, 0, 50, 50]}'
    )
    replies, ran, refused = asyncio.run(turns.run(two, ctx, used=0))
    assert (ran, refused) == (1, 1) and replies[0].ok and len(replies[0].images) == 1
    assert "budget of 1 calls is spent" in replies[1].text
    replies, ran, _ = asyncio.run(
        turns.run(call("geocode", '{"address": "Paris"}'), ctx, 0, allowed=["image_zoom_in_tool"])
    )
    assert ran == 0 and "unknown tool 'geocode'" in replies[0].text  # not offered in this row's prompt


def test_what_counts_as_the_style_answer() -> None:
    from geosleuth.training.swift.scheduler import gives_answer

    assert gives_answer(ANSWER) and gives_answer('Done. {"lat": 48.85, "lon": 2.35, "city": "Paris"}')
    assert not gives_answer(GEOCODE)
    assert not gives_answer(call("geocode", '{"address": "<answer>"}'))  # inside the call: not an answer


@pytest.mark.slow
def test_answer_beside_a_tool_call_ends_the_rollout(swift_run: dict) -> None:
    out = swift_run["rollouts"]["answer_and_call"]
    assert [m["role"] for m in out["messages"]][2:] == ["assistant"] and out["infos"]["tool_calls"] == 0
