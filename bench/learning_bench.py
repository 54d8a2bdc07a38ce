"""Does the documented recipe learn? SFT cold start, then GRPO with tool turns, on CPU.

    python bench/learning_bench.py [--sft-steps 57] [--grpo-steps 120] [--grpo-lr 7e-4]
        [--generations 8] [--batch 32] [--lr-scheduler linear] [--warmup-steps 10] [--iterations 1]
        [--beta 0] [--scale-rewards group] [--cold-start grpo|mixed|held-out] [--seed 0] [--out DIR] [--json]

The pipeline of docs/training.md, end to end, with nothing downloaded:

1. four shop signs from `examples/make_sign.py` (Paris, Berlin, Madrid, New York), a samples
   JSONL beside them (relative image paths), each sample's hint the sign's town line (a tiny
   model cannot read pixels; the hint is the text an OCR step would give it);
2. ``geosleuth data synthesize`` (on those signs, or with ``--cold-start mixed|held-out`` on
   nine other towns' signs too / instead) with a scripted observer (it recognises the sign and quotes
   its town line) and a scripted planner (it geocodes the town, then answers with the
   geocoder's coordinates), both on 127.0.0.1, the geocode tool real (offline gazetteer);
3. ``geosleuth data export-sft --to trl`` (hermes tool calls);
4. a tiny Qwen3-VL built locally (`geosleuth.testing.tiny_vlm`), its tokenizer trained on the
   exported records' text;
5. TRL ``SFTTrainer`` with ``assistant_only_loss=True`` on those records (a short cold start);
6. ``examples/training/trl/grpo_trl.py`` (TRL ``GRPOTrainer``) on the same samples with
   ``--prompt spotagent --tools geocode``: the policy's own ``<tool_call>`` blocks run
   geosleuth's geocode tool, and the ``step`` reward (Thinking with Map, [0, 1]) scores the
   final answer against the truth.

Nothing in GRPO is scripted: every token of every rollout is sampled from the policy. The
figures: mean reward and parse rate of the first and of the last 10 GRPO steps (the last
beside the first, as a ratio), tool calls the policy made during GRPO, seconds. With
``--json`` the last line is one JSON object; the curves go to ``DIR/learning_curves.png``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLACES = ("paris", "berlin", "madrid", "new_york")
OTHER_PLACES = ("lyon", "munich", "vienna", "lisbon", "rome", "warsaw", "prague", "seattle", "hanoi")
"""Towns GRPO never sees (each town line geocodes offline), for the cold starts below."""
COLD_STARTS = {"grpo": PLACES, "mixed": PLACES + OTHER_PLACES, "held-out": OTHER_PLACES}
"""The towns of the SFT records: GRPO's own; GRPO's among nine others (a short SFT then holds
only a rough memory of each answer); only the others (SFT teaches the format, GRPO the answers)."""
WINDOW = 10
_RESULT = re.compile(
    r"^1\. (?P<name>[^\n]+?) — (?P<where>[^\n]+?) \[\w\w\] @ (?P<lat>-?[\d.]+), (?P<lon>-?[\d.]+)", re.M
)


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def town_line(lines: tuple[str, ...]) -> str:
    """The sign line with the postcode and town (the third line of each chosen sign)."""
    return lines[2]


def make_samples(work: Path, places: tuple[str, ...], name: str) -> tuple[Path, dict[str, Any]]:
    """Render the signs; write a samples JSONL (relative image paths) beside them."""
    signs = _module(ROOT / "examples" / "make_sign.py")
    specs = {s.name: s for s in signs.SIGN_SET}
    (work / "signs").mkdir(parents=True, exist_ok=True)
    rows, thumbs = [], {}
    for place in places:
        spec = specs[place]
        path = signs.render_sign(spec.lines, work / "signs" / f"{place}.png")
        thumbs[place] = _thumb(path)
        hint = f"the sign reads '{town_line(spec.lines)}'"
        rows.append({"id": place, "image": f"signs/{place}.png", "lat": spec.lat, "lon": spec.lon,
                     "labels": {"country": spec.country_code}, "hint": hint})  # fmt: skip
    data = work / name
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return data, {"specs": specs, "thumbs": thumbs}


def _thumb(image: Any) -> Any:
    import numpy as np
    from PIL import Image

    img = image if isinstance(image, Image.Image) else Image.open(image)
    return np.asarray(img.convert("L").resize((48, 32)), dtype=float)


def observer(signs: dict[str, Any]) -> Any:
    """The scripted observer VLM: recognises the sign by its look and quotes its town line."""
    import base64
    import io

    import numpy as np
    from PIL import Image

    from geosleuth.testing import reply

    def describe(payload: dict[str, Any]) -> Any:
        url = payload["messages"][0]["content"][0]["image_url"]["url"]
        image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
        seen = _thumb(image)
        name = min(signs["thumbs"], key=lambda n: float(np.abs(signs["thumbs"][n] - seen).mean()))
        return reply(f"A shop sign reads '{town_line(signs['specs'][name].lines)}'.")

    return describe


def planner(payload: dict[str, Any]) -> Any:
    """The scripted planner: geocode the town named in the description, answer with the first hit."""
    from geosleuth.testing import reply, tool_call

    last = payload["messages"][-1]
    if last["role"] != "tool":
        quoted = re.search(r"reads '([^']+)'", str(last["content"]))
        town = re.sub(r"[\d-]+", "", quoted.group(1) if quoted else "").strip(" ,")
        return reply("", tool_calls=[tool_call("geocode", {"address": town}, "call_1")])
    hit = _RESULT.search(str(last["content"]))
    if hit is None:
        return reply("I cannot tell.")
    answer = {"lat": round(float(hit["lat"]), 3), "lon": round(float(hit["lon"]), 3),
              "city": hit["name"], "country": hit["where"].split(", ")[-1]}  # fmt: skip
    return reply(json.dumps(answer, ensure_ascii=False))


def geosleuth(*args: str) -> str:
    """Run the geosleuth CLI as a user would; fail loudly."""
    exe = Path(sys.executable).with_name("geosleuth")
    run = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        raise SystemExit(f"geosleuth {' '.join(args)} failed:\n{run.stdout[-2000:]}{run.stderr[-4000:]}")
    return run.stdout


def synthesize_and_export(
    work: Path, data: Path, signs: dict[str, Any], expected: int
) -> tuple[Path, dict[str, Any]]:
    from geosleuth.testing import FakeOpenAIServer

    with FakeOpenAIServer(observer(signs)) as obs, FakeOpenAIServer(planner) as plan:
        report = json.loads(geosleuth(
            "data", "synthesize", str(data), "-o", str(work / "synth"), "--observer-model", "observer",
            "--observer-base-url", obs.base_url, "--planner-model", "planner", "--planner-base-url",
            plan.base_url, "--tools", "geocode",
        ))  # fmt: skip
    if report["kept"] != expected:
        raise SystemExit(f"synthesis kept {report['kept']} of {expected}: {report}")
    sft = work / "sft.jsonl"
    geosleuth(
        "data", "export-sft", str(work / "synth"), "-o", str(sft), "--to", "trl", "--tool-format", "hermes"
    )
    return sft, report


def record_texts(records: list[dict[str, Any]]) -> list[str]:
    """Every text part of the SFT records: what the tokenizer is trained on."""
    return [p["text"] for r in records for m in r["messages"] for p in m["content"] if p.get("text")]


def with_grpo_tools(work: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records' system turns with the tool block GRPO's chat template will show
    (`trl_env.system_with_tools`), rendered with a scratch processor of the same template."""
    from geosleuth.testing.tiny_vlm import build_tiny_vlm
    from geosleuth.training.trl.env import make_environment_factory, system_with_tools

    scratch = build_tiny_vlm(work / "scratch-vlm", hub_files=False)
    environment = make_environment_factory(["geocode"])
    return [{**r, "messages": system_with_tools(r["messages"], environment, scratch)} for r in records]


def build_model(work: Path, records: list[dict[str, Any]], hidden: int) -> tuple[Path, Any]:
    from geosleuth.testing.tiny_vlm import build_tiny_vlm

    corpus = record_texts(records) + ["system\nuser\nassistant\n"]
    model_dir = work / "tiny-vlm"
    processor = build_tiny_vlm(
        model_dir, max_positions=4096, corpus=corpus, vocab_size=1000, hidden_size=hidden, across_words=True
    )
    return model_dir, processor


def sft(
    work: Path, model_dir: Path, processor: Any, records: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[Path, list[float]]:  # noqa: E501
    """TRL SFTTrainer on the exported records, loss on assistant turns only."""
    from datasets import Dataset
    from PIL import Image
    from transformers import Qwen3VLForConditionalGeneration
    from trl import SFTConfig, SFTTrainer

    rows = [{"messages": r["messages"], "images": [Image.open(p).convert("RGB") for p in r["images"]]}
            for r in records] * 4  # fmt: skip
    config = SFTConfig(
        output_dir=str(work / "sft-out"), max_steps=args.sft_steps, per_device_train_batch_size=4,
        learning_rate=args.sft_lr, lr_scheduler_type="constant", assistant_only_loss=True, max_length=None,
        logging_steps=5, save_strategy="no", report_to=[], use_cpu=True, seed=args.seed,
    )  # fmt: skip
    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir)
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=processor
    )
    trainer.train()
    out = work / "sft-model"
    trainer.save_model(out)
    for name in os.listdir(model_dir):  # tokenizer, image / video processor configs, chat template
        if not (out / name).exists():
            shutil.copy(model_dir / name, out / name)
    return out, [h["loss"] for h in trainer.state.log_history if "loss" in h]


def grpo(work: Path, model: Path, data: Path, args: argparse.Namespace) -> list[dict[str, Any]]:
    """The documented TRL recipe, in this process; its per-step logs."""
    recipe = _module(ROOT / "examples" / "training" / "trl" / "grpo_trl.py")
    trainer = recipe.main([
        "--model", str(model), "--data", str(data), "--out", str(work / "grpo-out"), "--tools", "geocode",
        "--prompt", "spotagent", "--bf16", "false", "--max-steps", str(args.grpo_steps * args.iterations),
        "--num-iterations", str(args.iterations),
        "--num-generations", str(args.generations), "--batch-size", str(args.batch),
        "--grad-accum", "1", "--learning-rate", str(args.grpo_lr), "--beta", str(args.beta),
        "--lr-scheduler", args.lr_scheduler, "--warmup-steps", str(args.warmup_steps),
        "--scale-rewards", args.scale_rewards, "--max-tool-calls", str(args.max_tool_calls),
        "--max-completion-length", "400", "--save-steps", "100000",
        "--seed", str(args.seed), "--temperature", str(args.temperature),
    ])  # fmt: skip
    return [h for h in trainer.state.log_history if "rewards/geo_step/mean" in h]


def row(what: str, value: float, ref_what: str, ref: float) -> None:
    """One figure, its reference from the same run, the ratio and the difference (no ratio to a
    reference of 0: a run too short to earn a reward says so instead of printing nan)."""
    ratio = f"{value / ref:6.2f}x" if ref else "no ratio (reference 0)"
    print(f"{what:38s} {value:6.3f} | {ref_what:16s} {ref:6.3f} | {ratio} ({value - ref:+.3f})")


def summarise(logs: list[dict[str, Any]], batch: int, seconds: float) -> dict[str, Any]:
    rewards = [float(h["rewards/geo_step/mean"]) for h in logs]
    parse = [float(h["geo/parse_rate"]) for h in logs]
    calls = sum(float(h.get("tools/call_frequency", 0.0)) * batch for h in logs)
    window = min(WINDOW, len(logs) // 2) or 1
    mean = lambda xs: sum(xs) / len(xs) if xs else None  # noqa: E731
    return {
        "first_reward": mean(rewards[:window]), "last_reward": mean(rewards[-window:]),
        "first_parse_rate": mean(parse[:window]), "last_parse_rate": mean(parse[-window:]),
        "tool_calls": round(calls), "grpo_steps": len(logs), "seconds": round(seconds, 1),
        "reward_curve": rewards, "parse_rate_curve": parse,
    }  # fmt: skip


def plot(summary: dict[str, Any], sft_loss: list[float], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 3.6))
    steps = range(1, len(summary["reward_curve"]) + 1)
    a.plot(steps, summary["reward_curve"], label="reward (step, mean)")
    a.plot(steps, summary["parse_rate_curve"], label="parse rate")
    a.set_xlabel("GRPO step")
    a.set_ylim(-0.02, 1.02)
    a.legend()
    a.set_title("GRPO: reward and parse rate")
    b.plot([5 * (i + 1) for i in range(len(sft_loss))], sft_loss)
    b.set_xlabel("SFT step")
    b.set_title("SFT cold start: loss (assistant tokens)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sft-steps", type=int, default=57, help="a short cold start: the format, not yet the places"
    )
    parser.add_argument("--sft-lr", type=float, default=3e-3)
    parser.add_argument(
        "--cold-start", choices=sorted(COLD_STARTS), default="grpo", help="towns of the SFT records"
    )
    parser.add_argument("--grpo-steps", type=int, default=120)
    parser.add_argument("--temperature", type=float, default=0.7, help="GRPO rollout sampling temperature")
    parser.add_argument("--grpo-lr", type=float, default=7e-4)
    parser.add_argument("--lr-scheduler", default="linear", help="GRPO learning-rate schedule (TRL: linear)")
    parser.add_argument("--beta", type=float, default=0.0, help="GRPO KL coefficient")
    parser.add_argument(
        "--scale-rewards", default="group", choices=["group", "batch", "none"], help="GRPO advantage scaling"
    )
    parser.add_argument(
        "--iterations", type=int, default=1, help="GRPO optimiser steps on each batch of rollouts (μ)"
    )
    parser.add_argument(
        "--warmup-steps",
        type=float,
        default=10,
        help="GRPO learning-rate warm-up steps (the first steps break a town)",
    )
    parser.add_argument(
        "--max-tool-calls", type=int, default=2, help="tool calls a rollout may make (one geocode suffices)"
    )
    parser.add_argument("--generations", type=int, default=8, help="GRPO group size (rollouts a prompt)")
    parser.add_argument(
        "--batch", type=int, default=32, help="GRPO rollouts a step (32: all four towns in every step)"
    )
    parser.add_argument("--hidden", type=int, default=64, help="hidden size of the tiny model")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--out", type=Path, default=None, help="keep the work folder here (default: temporary)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    for name in ("sft_steps", "grpo_steps", "batch", "generations", "max_tool_calls"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1, not {getattr(args, name)}")
    if args.batch % args.generations:
        parser.error(f"--batch {args.batch} is not a multiple of --generations {args.generations}")
    os.environ.update(HF_HUB_OFFLINE="1", TRL_EXPERIMENTAL_SILENCE="1", CUDA_VISIBLE_DEVICES="",
                      GEOSLEUTH_TOOL_CACHE_MODE="off", OMP_NUM_THREADS="1")  # fmt: skip
    import torch

    torch.set_num_threads(1)  # a tiny model: a second thread only spins on a shared machine
    work = args.out or Path(tempfile.mkdtemp(prefix="learning_bench_"))
    work.mkdir(parents=True, exist_ok=True)
    start, cpu_start = time.perf_counter(), time.process_time()
    data, _ = make_samples(work, PLACES, "samples.jsonl")
    towns = COLD_STARTS[args.cold_start]
    sft_data, signs = make_samples(work, towns, "sft_samples.jsonl")
    sft_path, report = synthesize_and_export(work, sft_data, signs, len(towns))
    records = [json.loads(line) for line in sft_path.read_text(encoding="utf-8").splitlines()]
    records = with_grpo_tools(work, records)
    model_dir, processor = build_model(work, records, args.hidden)
    sft_model, sft_loss = sft(work, model_dir, processor, records, args)
    grpo_start = time.perf_counter()
    logs = grpo(work, sft_model, data, args)
    summary = summarise(logs, args.batch, time.perf_counter() - start)
    summary["grpo_seconds"] = round(time.perf_counter() - grpo_start, 1)
    summary["cpu_seconds"] = round(time.process_time() - cpu_start, 1)
    summary["sft_loss_first_last"] = [sft_loss[0], sft_loss[-1]] if sft_loss else None
    plot(summary, sft_loss, work / "learning_curves.png")
    losses = f"loss {sft_loss[0]:.3f} -> {sft_loss[-1]:.3f}" if sft_loss else "no loss logged (1 in 5 steps)"
    print(f"synthesis kept {report['kept']} of {report['samples']}; SFT {args.sft_steps} steps, {losses}")
    row(
        "reward (step), last 10 GRPO steps", summary["last_reward"], "first 10 steps", summary["first_reward"]
    )
    row("parse rate, last 10 GRPO steps", summary["last_parse_rate"], "first 10 steps",
        summary["first_parse_rate"])  # fmt: skip
    print(f"tool calls during GRPO: {summary['tool_calls']}; {summary['grpo_steps']} steps; "
          f"{summary['seconds']} s in all ({summary['cpu_seconds']} CPU s in this process)")  # fmt: skip
    print(f"curves: {work / 'learning_curves.png'}")
    if args.json:
        print(json.dumps({k: summary[k] for k in ("first_reward", "last_reward", "first_parse_rate",
                          "last_parse_rate", "tool_calls", "grpo_steps", "seconds")}))  # fmt: skip


if __name__ == "__main__":
    main()
