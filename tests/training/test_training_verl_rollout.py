"""geosleuth's tools in verl 0.9.1's own tool agent loop, driven the way verl drives them.

verl's ``ToolAgentLoop`` is built as its agent-loop worker builds it (``hydra.utils.instantiate``
with the composed trainer config of ``grpo_single_node.sh``, the tools loaded by
``load_all_tools`` / ``initialize_tools_from_config`` from geosleuth's tool YAML), on a parquet
row that ``export-verl`` wrote and verl's ``RLHFDataset`` read. Its hermes parser reads the
policy's Qwen-style tool calls; each call goes through ``GeoSleuthTool.create`` / ``execute``
/ ``release``. Only the inference server is scripted: it answers each ``generate`` with the
next turn of a script, as vLLM would with sampled tokens. The rollout's tokens then go through
verl's reward-loop worker with geosleuth's reward manager.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image
from scripted_tools import registry, slow_lookup  # noqa: F401 - engines load test_…:registry

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "training" / "verl" / "grpo_single_node.sh"
ANSWER = '<answer>{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}</answer>'


def call(name: str, arguments: str) -> str:
    return f'<think>Next.</think>\n<tool_call>\n{{"name": "{name}", "arguments": {arguments}}}\n</tool_call>'


SCRIPTS = {
    "text_first": [
        call("geocode", '{"address": "Paris, France"}'),
        call("image_zoom_in_tool", '{"bbox_2d": [0, 0, 28, 28]}'),
        ANSWER,
    ],
    "image_first": [
        call("image_zoom_in_tool", '{"bbox_2d": [0, 0, 28, 28]}'),
        call("geocode", '{"address": "Paris, France"}'),
        ANSWER,
    ],
    "bad": [
        call("teleport", '{"to": "Paris"}'),
        call("image_zoom_in_tool", '{"bbox_2d": [5000, 5000, 9000, 9000]}'),
        call("slow_lookup", '{"query": "Paris"}'),
        '<tool_call>\n{"name": "geocode", "arguments": {"address": </tool_call>',
        '<tool_call>\n{"arguments": {"address": </tool_call>',
        ANSWER,
    ],
}


class ScriptedServer:
    """verl's LLM server client, answering each ``generate`` with the script's next turn."""

    def __init__(self, tokenizer: Any, script: list[str]) -> None:
        self.tokenizer = tokenizer
        self.script = script
        self.images_seen: list[int] = []
        self.base: int | None = (
            None  # tool responses already in the prompt (the system text may name the tag)
        )

    async def generate(self, request_id: str, prompt_ids: list[int], sampling_params: dict[str, Any],
                       image_data: Any = None, **kwargs: Any) -> Any:  # fmt: skip
        from verl.workers.rollout.replica import TokenOutput

        self.images_seen.append(len(image_data or []))
        responses = self.tokenizer.decode(prompt_ids).count("</tool_response>")
        self.base = responses if self.base is None else self.base
        turn = self.script[min(responses - self.base, len(self.script) - 1)]
        ids = self.tokenizer.encode(turn, add_special_tokens=False) + [self.tokenizer.eos_token_id]
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


def script_args(data_dir: Path) -> list[str]:
    """The exact argv grpo_single_node.sh passes to ``python3 -m verl.trainer.main_ppo``."""
    shell = 'python3(){ printf "%s\\0" "$@"; }; export -f python3; source "$0"'
    env = {**os.environ, "DATA": str(data_dir), "REWARD": "step"}
    out = subprocess.run(["bash", "-c", shell, str(SCRIPT)], env=env, capture_output=True, check=True).stdout
    args = out.decode().split("\0")[:-1]
    assert args[:2] == ["-m", "verl.trainer.main_ppo"]
    return args[2:]


def compose(overrides: list[str]) -> Any:
    """verl's config as ``main_ppo`` composes it (the dry run's composition)."""
    from geosleuth.training.verl.check import compose as verl_compose

    return verl_compose(overrides)


@pytest.fixture(scope="module")
def verl_setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    pytest.importorskip("verl.experimental.agent_loop.tool_agent_loop", reason="verl's agent loop")
    from test_training_smoke import _tiny_vlm
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from geosleuth.core.records import Sample
    from geosleuth.training.verl.export import VerlExportOptions, export_verl
    from geosleuth.training.verl.tool_config import dump_tool_config, tool_config

    tmp = tmp_path_factory.mktemp("verl_rollout")
    corpus = tuple(t for turns in SCRIPTS.values() for t in turns)
    processor = _tiny_vlm(tmp / "model", max_positions=8192, corpus=corpus)
    processor.tokenizer.save_pretrained(tmp / "model")
    Image.new("RGB", (640, 480), (120, 30, 200)).save(tmp / "photo.jpg")
    sample = Sample(id="p", image=str(tmp / "photo.jpg"), lat=48.85, lon=2.35, labels={"country": "France"})
    reg = registry()
    schemas = tuple(reg.get(n).schema() for n in ("image_zoom_in_tool", "geocode", "slow_lookup"))  # type: ignore[union-attr]
    export_verl([sample], tmp / "train.parquet", VerlExportOptions(schemas=schemas, pixel_budget=64 * 64))
    factory = "test_training_verl_rollout:registry"
    doc = tool_config(schemas, registry_factory=factory, max_text_chars=4000, timeout_s=1.0)
    (tmp / "tools.yaml").write_text(dump_tool_config(doc))
    (tmp / "val.parquet").write_bytes((tmp / "train.parquet").read_bytes())
    cfg = compose(script_args(tmp) + [f"actor_rollout_ref.model.path={tmp / 'model'}"])
    data_cfg = {**{k: cfg.data[k] for k in ("prompt_key", "image_key", "return_raw_chat")}}
    data_cfg.update(max_prompt_length=8192, filter_overlong_prompts=False, cache_dir=str(tmp / "cache"))
    from omegaconf import OmegaConf

    row = RLHFDataset(
        [str(tmp / "train.parquet")], processor.tokenizer, OmegaConf.create(data_cfg), processor
    )[0]
    asyncio.run(reg.call("geocode", {"address": "Paris"}, None))  # the gazetteer loads once, untimed
    return {"tmp": tmp, "cfg": cfg, "processor": processor, "row": row}


async def _rollout(setup: dict[str, Any], script: list[str]) -> tuple[Any, ScriptedServer, list[Any]]:
    import hydra
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap, ToolListWrap
    from verl.tools.tool_registry import load_all_tools

    from geosleuth.training.verl.dataset import GeoSleuthRLHFDataset

    cfg = setup["cfg"]
    tools = load_all_tools(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path, None)
    processor = setup["processor"]
    server = ScriptedServer(processor.tokenizer, script)
    loop = hydra.utils.instantiate(
        config={"_target_": "verl.experimental.agent_loop.tool_agent_loop.ToolAgentLoop"},
        trainer_config=DictConfigWrap(config=cfg),
        server_manager=server,
        tokenizer=processor.tokenizer,
        processor=processor,
        hf_model_type="qwen3_vl",
        dataset_cls=GeoSleuthRLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        tools=ToolListWrap(tools),
    )
    row = setup["row"]
    output = await loop.run(
        {"temperature": 1.0}, raw_prompt=row["raw_prompt"], tools_kwargs=row["tools_kwargs"],
        extra_info=row["extra_info"],
    )  # fmt: skip
    return output, server, tools


def _score(setup: dict[str, Any], output: Any) -> dict[str, Any]:
    """The rollout's tokens through verl's reward-loop worker and geosleuth's reward manager."""
    import torch
    from test_training_verl_manager import _config, _worker_scores
    from verl import DataProto

    prompt, response, mask = output.prompt_ids, output.response_ids, output.response_mask
    tensors = {
        "prompts": torch.tensor([prompt]),
        "responses": torch.tensor([response]),
        "attention_mask": torch.ones((1, len(prompt) + len(response)), dtype=torch.long),
        "response_mask": torch.tensor([mask]),
    }
    truth = setup["row"]["reward_model"]
    non_tensor = {
        "data_source": np.array(["geosleuth"], dtype=object),
        "reward_model": np.array([truth], dtype=object),
        "extra_info": np.array([{"index": 0}], dtype=object),
    }
    data = DataProto.from_dict(tensors=tensors, non_tensors=non_tensor)
    return _worker_scores(_config(setup["tmp"] / "model", "geosleuth"), data)[0]


@pytest.mark.slow
@pytest.mark.parametrize("order", ["text_first", "image_first"])
def test_tool_rollout_through_verls_agent_loop(verl_setup: dict[str, Any], order: str) -> None:
    output, server, tools = asyncio.run(_rollout(verl_setup, SCRIPTS[order]))
    assert {t.name for t in tools} == {"image_zoom_in_tool", "geocode", "slow_lookup"}
    tok = verl_setup["processor"].tokenizer
    response = tok.decode(output.response_ids)
    assert output.num_turns == 6  # user prompt + three assistant turns + two tool turns
    assert response.count("<tool_response>") == 2 and response.rstrip().endswith(ANSWER + "<|im_end|>")
    geocoded = response.split("<tool_response>")[1 if order == "text_first" else 2]
    assert "Paris" in geocoded and "Error" not in geocoded
    # the crop came back as an image: verl passed it to the server with the next generate call
    images = output.multi_modal_data["images"]
    assert len(images) == 2 and isinstance(images[1], Image.Image) and images[1].size[0] >= 32
    zoom_turn = 2 if order == "text_first" else 1
    assert server.images_seen[zoom_turn - 1] == 1 and server.images_seen[zoom_turn] == 2
    # tool tokens are masked out of the loss; the policy's own are in it
    masked = tok.decode([t for t, m in zip(output.response_ids, output.response_mask, strict=True) if m == 0])
    assert "Paris" in masked and ANSWER not in masked
    score = _score(verl_setup, output)
    assert score["reward_score"] == 1.0 and score["reward_extra_info"]["acc@1km"] == 1.0


@pytest.mark.slow
def test_bad_calls_become_errors_the_policy_reads(verl_setup: dict[str, Any]) -> None:
    output, server, _ = asyncio.run(_rollout(verl_setup, SCRIPTS["bad"]))
    tok = verl_setup["processor"].tokenizer
    responses = tok.decode(output.response_ids).split("<tool_response>")[1:]
    assert len(responses) == 5 and len(server.images_seen) == 6  # the rollout went on after each error
    assert "Unknown function 'teleport'" in responses[0]
    assert "outside the image" in responses[1]
    assert "slow_lookup timed out after 1 s" in responses[2]
    # geosleuth_hermes (the script's multi_turn.format) keeps a call whose JSON is broken, so
    # verl's own _call_tool answers it; verl's plain hermes parser would drop it and end the rollout
    assert "Invalid JSON in arguments for 'geocode'" in responses[3]
    assert "Unknown function 'unreadable_tool_call'" in responses[4]
    assert tok.decode(output.response_ids).rstrip().endswith(ANSWER + "<|im_end|>")
    assert _score(verl_setup, output)["reward_score"] == 1.0


@pytest.mark.slow
def test_the_verl_extra_installs_what_the_agent_loop_imports() -> None:
    """verl is installed without its dependencies (they pull vLLM and CUDA); the `verl` extra
    must supply every module its tool agent loop, tool registry and reward loop import."""
    import sys
    import tomllib

    pytest.importorskip("verl")
    modules = [
        "verl.experimental.agent_loop.tool_agent_loop",
        "verl.experimental.agent_loop.tool_parser",
        "verl.tools.tool_registry",
        "verl.experimental.reward_loop.reward_loop",
    ]
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    run = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verl"]
    assert any(req.startswith("cachetools") for req in extra)  # verl.workers.rollout.router imports it


class _CharTokenizer:
    """Token ids are code points: enough for a parser that only decodes."""

    @staticmethod
    def decode(ids: list[int]) -> str:
        return "".join(map(chr, ids))


@pytest.mark.parametrize(
    ("body", "name", "arguments"),
    [
        ('{"name": "geocode", "arguments": {"address": "Paris"}}', "geocode", '{"address": "Paris"}'),
        (
            '{"name": "geocode", "arguments": {"address": ',
            "geocode",
            '{"name": "geocode", "arguments": {"address":',
        ),
        ("no json at all", "unreadable_tool_call", "no json at all"),
        ('{"tool": "geocode"}', "unreadable_tool_call", None),
    ],
)
def test_geosleuth_hermes_keeps_every_call(body: str, name: str, arguments: str | None) -> None:
    pytest.importorskip("verl.experimental.agent_loop.tool_parser")
    from geosleuth.training.verl.parser import GeoSleuthHermesToolParser

    text = f"<think>x</think><tool_call>\n{body}\n</tool_call>"
    content, (call,) = asyncio.run(
        GeoSleuthHermesToolParser(_CharTokenizer()).extract_tool_calls(list(map(ord, text)))
    )
    assert content == "<think>x</think>" and call.name == name
    if arguments is not None:
        assert call.arguments == arguments
    else:
        assert call.arguments.startswith("not a tool call")


def test_geosleuth_hermes_never_raises_and_keeps_one_call_per_block() -> None:
    pytest.importorskip("verl.experimental.agent_loop.tool_parser")
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from geosleuth.training.verl.parser import GeoSleuthHermesToolParser

    parser = GeoSleuthHermesToolParser(_CharTokenizer())
    body = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<>"), max_size=80
    )

    @settings(max_examples=60, deadline=None)
    @given(st.lists(body, min_size=1, max_size=3))
    def check(bodies: list[str]) -> None:
        text = "".join(f"<tool_call>{b}</tool_call>" for b in bodies)
        _, calls = asyncio.run(parser.extract_tool_calls(list(map(ord, text))))
        assert len(calls) == len(bodies) and all(c.name and isinstance(c.arguments, str) for c in calls)

    check()
