"""A real TRL GRPO step in which the policy calls geosleuth's tools (text first, image first, and
every kind of bad call), on a tiny random Qwen3-VL whose generation follows a script.

TRL's own trainer path runs: prompt tokenisation, ``_tool_call_loop`` (tool execution, tool
suffix tokens, the crop fed back as pixels), reward, loss and optimiser step. Only the next
token is forced (`scripted_policy`).
"""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
from PIL import Image
from scripted_tools import registry, slow_lookup  # noqa: F401 - engines load test_…:registry

ANSWER = '<answer>{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}</answer>'


def call(name: str, arguments: str) -> str:
    return f'<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


GEOCODE = call("geocode", '{"address": "Paris, France"}')
ZOOM = call("image_zoom_in_tool", '{"bbox_2d": [0, 0, 32, 32]}')
SCRIPTS = {
    "text": [GEOCODE, ZOOM, ANSWER],
    "image": [ZOOM, GEOCODE, ANSWER],
    "bad": [
        call("teleport", '{"to": "Paris"}'),
        call("image_zoom_in_tool", '{"bbox_2d": [500, 500, 900, 900]}'),
        call("slow_lookup", '{"query": "Paris"}'),
        '<tool_call>\n{"name": "geocode", "arguments": {"query": </tool_call>',
        ANSWER,
    ],
}


def plan(text: str) -> str:
    """The next turn of the row's script: its order is named in the prompt, its step is the
    number of tool responses so far."""
    order = next(name for name in SCRIPTS if f"ORDER {name}." in text)
    script = SCRIPTS[order]
    return script[min(text.count("</tool_response>"), len(script) - 1)]


def first_tool(messages: list[dict[str, Any]]) -> str:
    return str(messages[0]["tool_calls"][0]["function"]["name"])


CORPUS = tuple(SCRIPTS["text"] + SCRIPTS["bad"]) + ("ORDER text. ORDER image. ORDER bad.",)


@pytest.mark.slow
def test_grpo_step_with_real_tool_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("trl")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from datasets import Dataset
    from scripted_policy import scripted_model
    from test_training_smoke import _tiny_vlm
    from trl import GRPOConfig, GRPOTrainer

    from geosleuth.training.trl.env import check_context, make_environment_factory, trl_processor
    from geosleuth.training.trl.reward import make_reward_func

    processor = _tiny_vlm(tmp_path / "m", max_positions=8192, corpus=CORPUS)
    model = scripted_model(tmp_path / "m", processor.tokenizer, plan)
    orders = ["text", "image", "bad"]
    prompts = [
        [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"Where? ORDER {o}."}]}]
        for o in orders
    ]
    dataset = Dataset.from_dict(
        {
            "prompt": prompts,
            "image": [Image.new("RGB", (64, 64), (i * 60, 90, 160)) for i in range(3)],
            "lat": [48.85] * 3,
            "lon": [2.35] * 3,
        }
    )
    reward = make_reward_func("step")
    seen: list[tuple[list[Any], list[float]]] = []
    original = reward._score

    def recording(completions: Any, columns: dict[str, Any]) -> list[float]:
        out = original(completions, columns)
        seen.append((list(completions), out))
        return out

    reward._score = recording  # type: ignore[method-assign]
    from geosleuth.tools.base import ToolContext
    from geosleuth.training.verl.tools import shared_registry

    warm = shared_registry(None, "test_training_trl_tools:registry")  # the gazetteer loads once, untimed
    assert asyncio.run(warm.call("geocode", {"address": "Paris, France"}, ToolContext())).ok
    env = make_environment_factory(
        ["image_zoom_in_tool", "geocode", "slow_lookup"],
        registry_factory="test_training_trl_tools:registry",
        processor=processor,
        timeout_s=1.0,
    )
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=1500,
        max_steps=3,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        learning_rate=1e-4,
        beta=0.0,
        max_tool_calling_iterations=5,
    )
    tiny = trl_processor(processor)
    check_context(tiny, env, prompts[0], max_model_len=8192, max_completion_length=1500)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=args,
        train_dataset=dataset,
        processing_class=tiny,
        environment_factory=env,
    )
    result = trainer.train()
    assert math.isfinite(result.training_loss)

    logs = [h for h in trainer.state.log_history if "loss" in h]
    assert len(logs) == 3 and len(seen) == 3  # one step per order: no step mixes text-first and image-first
    for h in logs:
        assert (
            h["tools/call_frequency"] > 0 and "tools/failure_frequency" in h and "rewards/geo_step/mean" in h
        )
    rollouts = {first_tool(c[0]): (c, r) for c, r in seen}
    assert set(rollouts) == {"geocode", "image_zoom_in_tool", "teleport"}

    for first, second in (("geocode", "image_zoom_in_tool"), ("image_zoom_in_tool", "geocode")):
        completions, rewards = rollouts[first]
        assert rewards == [1.0, 1.0]  # the policy answered after both tools
        for messages in completions:
            assert [m["role"] for m in messages] == ["assistant", "tool", "assistant", "tool", "assistant"]
            assert [messages[1]["name"], messages[3]["name"]] == [first, second]
            text = messages[1 if first == "geocode" else 3]["content"]
            assert isinstance(text, str) and "Paris" in text and "error" not in text.lower()
            crop = messages[3 if first == "geocode" else 1]["content"]
            assert isinstance(crop[0]["image"], Image.Image) and crop[0]["image"].size[0] >= 32
            assert messages[4]["content"] == ANSWER
    # the crop reached the model as pixels in the next turn: the prompt image plus the crop
    after_zoom = [
        n for text, n in model.turns if "ORDER text." in text and text.count("</tool_response>") == 2
    ]
    assert after_zoom and all(n == 2 for n in after_zoom)

    completions, rewards = rollouts["teleport"]
    assert rewards == [1.0, 1.0]  # every error was read, and the policy still answered
    for messages in completions:
        errors = [str(m["content"]) for m in messages if m["role"] == "tool"]
        assert len(errors) == 4 and messages[-1]["content"] == ANSWER
        assert "teleport not found" in errors[0]
        assert "outside the image" in errors[1]
        assert "timed out after 1 s" in errors[2]
        # broken JSON: without trl_processor, TRL would read this turn as the final answer
        assert errors[3].startswith("Error: tool call is not valid JSON")


def test_prompt_and_tool_schemas_past_the_context_fail_at_start_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from test_training_smoke import _tiny_vlm
    from test_training_trl_env import FACTORY

    from geosleuth.training.trl.env import check_context, make_environment_factory, trl_processor

    processor = trl_processor(_tiny_vlm(tmp_path / "m"))
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]}]
    every = make_environment_factory(registry_factory=FACTORY)
    one = make_environment_factory(["image_zoom_in_tool"], registry_factory=FACTORY)
    n_every = check_context(processor, every, prompt, max_model_len=10**6, max_completion_length=100)
    n_one = check_context(processor, one, prompt, max_model_len=10**6, max_completion_length=100)
    assert n_every > n_one + 1000  # ten schemas cost far more than one
    with pytest.raises(ValueError, match=rf"is {n_every} tokens.*context is {n_every}.*fewer tools"):
        check_context(processor, every, prompt, max_model_len=n_every, max_completion_length=100)
    with caplog.at_level("WARNING", logger="geosleuth.training.trl.env"):
        assert check_context(processor, every, prompt, max_model_len=n_every + 50, max_completion_length=100)
    assert any("silently drops a tool result" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="geosleuth.training.trl.env"):
        check_context(processor, one, prompt, max_model_len=n_every, max_completion_length=100)
    assert not caplog.records


def test_tool_timeout_is_an_error_the_policy_reads() -> None:
    from geosleuth.tools.base import ToolContext
    from geosleuth.training.toolcall import run_tool

    result = asyncio.run(run_tool(registry(), "slow_lookup", {"query": "x"}, ToolContext(), timeout_s=0.05))
    assert not result.ok and result.text.startswith("Error: slow_lookup timed out after 0.05 s")


def test_every_tool_call_block_becomes_a_call_or_an_error() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from geosleuth.training.trl.env import INVALID_CALL, UNREADABLE, _calls_with_errors

    (ok,) = _calls_with_errors(GEOCODE)
    assert ok["function"] == {"name": "geocode", "arguments": {"address": "Paris, France"}}
    (broken,) = _calls_with_errors('<tool_call>{"name": "geocode", "arguments": {</tool_call>')
    assert (
        broken["function"]["name"] == "geocode"
        and "not valid JSON" in broken["function"]["arguments"][INVALID_CALL]
    )
    (nameless,) = _calls_with_errors("<tool_call>garbage</tool_call>")
    assert nameless["function"]["name"] == UNREADABLE

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.text(alphabet=st.characters(blacklist_characters="<>"), max_size=60), min_size=1, max_size=3
        )
    )
    def check(bodies: list[str]) -> None:
        calls = _calls_with_errors("".join(f"<tool_call>{b}</tool_call>" for b in bodies))
        assert all(
            isinstance(c["function"]["name"], str) and isinstance(c["function"]["arguments"], dict)
            for c in calls
        )

    check()
