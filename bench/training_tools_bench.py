"""CPU cost of tool-calling rollouts on the tiny model: every figure beside a reference measured
in the same run, as a ratio.

    python bench/training_tools_bench.py [--steps 3] [--rollouts 20]

| figure | reference |
|---|---|
| TRL GRPO step (2 rollouts: geocode, zoom, answer), CPU s | the same step answered at once |
| ms-swift `geosleuth_tools` step (one tool turn), CPU s | the bare registry call of that tool |
| verl tool context decoding a 3000×2000 JPEG, ms | an `asyncio.to_thread` round trip (going off the loop) |

The policy is the tests' tiny random Qwen3-VL (≈140 k parameters) with scripted generation
(`tests/training/scripted_policy.py`), so the figures are the engines' and geosleuth's own
overhead, not a model's. CPU seconds are ``time.process_time`` (every thread of the process).
ms-swift runs in a subprocess with ``.swift-deps`` on its path, as in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests" / "training"


def row(what: str, value: float, unit: str, ref_what: str, ref: float) -> None:
    """One figure, its reference and the ratio (value / reference)."""
    ratio = value / ref if ref else float("nan")
    print(f"{what:52s} {value:10.4f} {unit:6s} | {ref_what:42s} {ref:10.4f} {unit:6s} | {ratio:7.2f}x")


def trl_cpu_per_step(script: list[str], steps: int, work: Path) -> float:
    """Mean CPU seconds of one GRPO step (after a warm-up step) with the scripted policy."""
    from datasets import Dataset
    from PIL import Image
    from scripted_policy import scripted_model
    from test_training_smoke import _tiny_vlm
    from test_training_trl_tools import CORPUS, registry  # noqa: F401  (the factory below imports it)
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from geosleuth.training.trl.env import make_environment_factory, trl_processor
    from geosleuth.training.trl.reward import make_reward_func

    processor = _tiny_vlm(work / "m", max_positions=8192, corpus=CORPUS)
    model = scripted_model(
        work / "m",
        processor.tokenizer,
        lambda text: script[min(text.count("</tool_response>"), len(script) - 1)],
    )
    prompt = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "Where?"}]}]
    n = steps + 1
    data = Dataset.from_dict(
        {
            "prompt": [prompt] * n,
            "image": [Image.new("RGB", (64, 64), (9, 9, 9))] * n,
            "lat": [48.85] * n,
            "lon": [2.35] * n,
        }
    )
    cpu: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, *args: Any, **kwargs: Any) -> None:
            self.start = time.process_time()

        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            cpu.append(time.process_time() - self.start)

    args = GRPOConfig(
        output_dir=str(work / "out"), per_device_train_batch_size=2, num_generations=2,
        max_completion_length=1500,
        max_steps=n, logging_strategy="no", save_strategy="no", report_to=[], use_cpu=True, beta=0.0,
        max_tool_calling_iterations=4, disable_tqdm=True,
    )  # fmt: skip
    env = make_environment_factory(
        ["image_zoom_in_tool", "geocode"],
        registry_factory="test_training_trl_tools:registry",
        processor=processor,
    )
    trainer = GRPOTrainer(
        model=model, reward_funcs=[make_reward_func("step")], args=args, train_dataset=data,
        processing_class=trl_processor(processor), environment_factory=env, callbacks=[Clock()],
    )  # fmt: skip
    trainer.train()
    return sum(cpu[1:]) / len(cpu[1:])


SWIFT_DRIVER = r"""
import asyncio, json, sys, time
from swift.utils import import_external_file
import_external_file(sys.argv[1])
from swift.infer_engine.protocol import (ChatCompletionResponse, ChatCompletionResponseChoice, ChatMessage,
                                         RequestConfig, RolloutOutput, UsageInfo)
from swift.rl_core.data import GRPOSample
from swift.rollout import multi_turns
from swift.rollout.agent_loop import run_multi_turn
from geosleuth.tools.base import ToolContext
from geosleuth.training.swift.scheduler import query_image, register_scheduler
from geosleuth.training.verl.tools import shared_registry

row = json.loads(open(sys.argv[2]).read().splitlines()[0])
rollouts, script = int(sys.argv[3]), json.loads(sys.argv[4])
register_scheduler("geo_bench", registry_factory="test_training_trl_tools:registry")
sched = multi_turns["geo_bench"](max_turns=8, tokenizer=None, template=None)
registry = shared_registry(None, "test_training_trl_tools:registry")
ctx = ToolContext(image=query_image(row["images"][0]), model_size=tuple(row["model_size"]))
calls = [("geocode", {"address": "Paris, France"}), ("image_zoom_in_tool", {"bbox_2d": [0, 0, 500, 350]})]
for name, args in calls:  # warm-up: gazetteer, image decode
    asyncio.run(registry.call(name, args, ctx))

def reply(text):
    message = ChatMessage(role="assistant", content=text)
    choice = ChatCompletionResponseChoice(index=0, message=message, finish_reason="stop")
    response = ChatCompletionResponse(model="scripted", choices=[choice], usage=UsageInfo(0, 0, 0))
    return RolloutOutput(response=response)

def rollout_fn(reqs, cfg):
    return [reply(script[min(sum(m["role"] == "tool" for m in r.messages), len(script) - 1)]) for r in reqs]

cfg = RequestConfig(max_tokens=64)
def request():
    return GRPOSample.from_row(json.loads(json.dumps(row))).to_infer_request(include_extra=True)

requests = [request() for _ in range(rollouts)]
start = time.process_time()
outs = run_multi_turn(requests, rollout_fn(requests, cfg), sched, rollout_fn, cfg, max_turns=8)
scheduler_cpu = time.process_time() - start
tool_turns = sum(o.rollout_infos["tool_calls"] for o in outs)
start = time.process_time()
for _ in range(rollouts):
    for name, args in calls:
        asyncio.run(registry.call(name, args, ctx))
bare_cpu = time.process_time() - start
bare_per_call = bare_cpu / (rollouts * len(calls))
print(json.dumps({"per_step": scheduler_cpu / tool_turns, "bare_per_call": bare_per_call}))
"""


def swift_cpu(rollouts: int, script: list[str], work: Path) -> dict[str, float] | None:
    deps = ROOT / ".swift-deps"
    if not (deps / "swift" / "rollout").is_dir():
        print(
            "ms-swift scheduler step: skipped (ms-swift 4.x not in .swift-deps; scripts/test.sh installs it)"
        )
        return None
    from test_training_swift import PLUGIN, write_swift_dataset

    work.mkdir(parents=True, exist_ok=True)
    data = write_swift_dataset(work)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(deps), str(TESTS), str(ROOT / "src")]),
           "GEOSLEUTH_TOOL_CACHE_MODE": "off"}  # fmt: skip
    run = subprocess.run(
        [sys.executable, "-c", SWIFT_DRIVER, str(PLUGIN), str(data), str(rollouts), json.dumps(script)],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    if run.returncode != 0:
        raise SystemExit(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def decode_figure(work: Path, runs: int = 5) -> None:
    """Why verl's tool context decodes off the event loop: the decode beside a hop to a thread."""
    import asyncio

    import numpy as np
    from PIL import Image

    from geosleuth.training.verl.tools import _context

    rng = np.random.default_rng(0)
    ramp = np.linspace(0, 255, 3000, dtype=np.float32)[None, :, None]
    pixels = np.clip(ramp + rng.normal(0, 20, (2000, 3000, 3)), 0, 255).astype(np.uint8)
    path = work / "query.jpg"
    Image.fromarray(pixels).save(path, quality=90)

    def best(call: Any) -> float:
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return min(times)

    decode = best(lambda: _context({"image": str(path)}, {}, decode=True))
    loop = asyncio.new_event_loop()
    hop = best(lambda: loop.run_until_complete(asyncio.to_thread(lambda: None)))
    loop.close()
    row(
        "verl tool context, 3000×2000 JPEG decoded",
        decode * 1e3,
        "ms",
        "asyncio.to_thread round trip",
        hop * 1e3,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3, help="TRL steps measured (after one warm-up step)")
    parser.add_argument("--rollouts", type=int, default=20, help="ms-swift rollouts (two tool turns each)")
    args = parser.parse_args()
    sys.path[:0] = [str(TESTS), str(ROOT / "src")]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("GEOSLEUTH_TOOL_CACHE_MODE", "off")
    import logging

    logging.disable(logging.WARNING)
    from test_training_trl_tools import ANSWER, GEOCODE, ZOOM

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        decode_figure(work)
        tools = trl_cpu_per_step([GEOCODE, ZOOM, ANSWER], args.steps, work / "tools")
        direct = trl_cpu_per_step([ANSWER], args.steps, work / "direct")
        row("TRL GRPO step, geocode + zoom + answer", tools, "CPU s", "same step, answer at once", direct)
        swift_script = [s.replace("[0, 0, 32, 32]", "[0, 0, 500, 350]") for s in (GEOCODE, ZOOM, ANSWER)]
        figures = swift_cpu(args.rollouts, swift_script, work / "swift")
        if figures:
            row("ms-swift scheduler step (one tool turn)", figures["per_step"], "CPU s",
                "bare registry call of the same tool", figures["bare_per_call"])  # fmt: skip


if __name__ == "__main__":
    main()
