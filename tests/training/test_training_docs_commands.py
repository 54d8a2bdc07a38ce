"""Every training command in docs/training.md and examples/training/ runs as written on a CPU.

The commands are read from the page (its shell blocks, and inline code that starts a script or
an engine) and from the examples' headers; `HOW` says how each one runs, so a new command
cannot slip past unnoticed. They run in one workspace: the page's own command builds the tiny
model (`./tiny`), `data/train.jsonl` and `data/val.jsonl` are samples JSONL whose image paths
are relative to the file (`img/…`), and `examples` is the checkout's. A command that needs a
GPU runs in the CPU form the page prints beside it. Where a placeholder has to become a real
path or value (`train.jsonl`, `path/to/train.csv`, `DATASET`), the test names the exact words it
replaces (`SUBSTITUTE`, `words`) and `HOW` says so. The
`swift rlhf` commands are parsed by ms-swift 4.6's own argument parser and their plugin loaded
by its own loader (`.swift-deps`); running `swift rlhf` itself needs ms-swift's own
environment and is `tests/training/test_training_swift_rlhf.py`'s.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "training.md"
EXAMPLES = ROOT / "examples" / "training"
SWIFT_DEPS = ROOT / ".swift-deps"
FENCE = re.compile(r"^```(\w*)\s*$")
STARTS = r"(?:[A-Z_]+=\S+ )*(?:python3?|bash|swift|swift-env/bin/(?:pip|swift)) "
INLINE = re.compile(rf"`({STARTS}[^`]+|geosleuth (?:data|eval) [^`]+)`")
HEADER = re.compile(rf"^\s*(?:#\s*(?:\w+:)?\s*)?({STARTS}.*|geosleuth data .*)$")

TRL = "python examples/training/trl/grpo_trl.py"
VERL = "bash examples/training/verl"
PLUGIN = "examples/training/swift/geo_orm_plugin.py"
TINY = (
    "python -c 'from pathlib import Path; from geosleuth.testing.tiny_vlm import build_tiny_vlm; "
    'build_tiny_vlm(Path("tiny"))\''
)
TRL_GPU = f"{TRL} --model Qwen/Qwen3-VL-2B-Instruct --data train.jsonl --reward step --out runs/grpo"
TRL_CPU = (
    f"{TRL} --model ./tiny --data train.jsonl --tools image_zoom_in_tool,geocode --bf16 false --max-steps 2 "
    "--num-generations 2 --batch-size 2 --grad-accum 1 --max-completion-length 32"
)
PREPARE = f"DATASET=data/train.jsonl VAL=data/val.jsonl OUT=data/verl MODEL_DIR=tiny {VERL}/prepare_data.sh"
DRY_RUN = f"DRY_RUN=1 DATA=data/verl MODEL=tiny {VERL}/grpo_single_node.sh"
MULTI_LAUNCH = f"DRY_RUN=1 DATA=data/verl MODEL=tiny NNODES=4 {VERL}/grpo_multi_node.sh launch"
MERGE = (
    "python -m verl.model_merger merge --backend fsdp --local_dir …/global_step_N/actor "
    "--target_dir phase1_hf"
)
BENCH_SMOKE = (
    "python bench/learning_bench.py --sft-steps 5 --grpo-steps 2 --batch 8 --generations 4 "
    "--out lb-smoke --json"
)
SWIFT = "swift rlhf --rlhf_type grpo"
SWIFT_DOC = (
    f"{SWIFT} --model Qwen/Qwen2.5-VL-7B-Instruct --dataset swift_train.jsonl --external_plugins {PLUGIN} "
    "--reward_funcs geo_step"
)
TOOLS_TURNS = "--multi_turn_scheduler geosleuth_tools --max_turns"
SWIFT_TOOLS = "image_zoom_in_tool,web_search,geocode"
PLUGIN_EXPORT = (
    f"geosleuth data export-swift train.jsonl --out swift_train.jsonl --tools {SWIFT_TOOLS} --model MODEL_DIR"
)

SWIFT_HOW = (
    "ms-swift 4.6 parses it and loads its plugin; "
    "`swift rlhf` itself: tests/training/test_training_swift_rlhf.py"
)

SWIFT_ENV = "scripts/test.sh's swift_venv builds this environment with the same pins (.swift-venv)"

HOW: dict[str, str] = {  # every command of the page and the examples -> how this file runs it
    TINY: "run as written",
    TRL_GPU: "needs a GPU (the page says so): its CPU form, TRL_CPU, runs",
    TRL_CPU: "run, train.jsonl -> data/train.jsonl (the page's and grpo_trl.py's CPU command)",
    TRL_GPU.replace(" --reward step", ""): "grpo_trl.py's GPU command: TRL_CPU runs",
    f"{TRL} --model DIR --data train.jsonl --tools image_zoom_in_tool,geocode --bf16 false --max-steps 2 …":
        "the engine table's short form of TRL_CPU",
    PREPARE: "run as written",
    DRY_RUN: "run as written (the CPU form of grpo_single_node.sh)",
    MULTI_LAUNCH: "run as written (the CPU form of the multi-node launch)",
    f"{VERL}/prepare_data.sh": "PREPARE (the engine table names its variables beside it)",
    f"{VERL}/grpo_single_node.sh": "needs GPUs and vLLM: DRY_RUN runs",
    "DATASET=path/to/train.csv VAL=path/to/val.csv OUT=~/data/geosleuth bash prepare_data.sh":
        "run, paths -> the workspace's data files",
    "ROLE=head bash grpo_multi_node.sh": "run with a `ray` stub on PATH that records its arguments",
    "ROLE=worker HEAD_IP=10.0.0.1 bash grpo_multi_node.sh": "run with the `ray` stub",
    "NNODES=4 bash grpo_multi_node.sh launch": "needs a GPU cluster: MULTI_LAUNCH runs",
    "TRAIN_FILE=$DATA/phase1.parquet bash grpo_single_node.sh": "needs GPUs: run with DRY_RUN=1 exported",
    "TRAIN_FILE=$DATA/phase2.parquet MODEL=phase1_hf bash grpo_single_node.sh":
        "needs phase I's GPU checkpoint: not run",
    MERGE: "needs a verl checkpoint from a GPU run: verl's merger parser is checked to take its flags",
    PLUGIN_EXPORT: "run, train.jsonl -> data/train.jsonl, MODEL_DIR -> the tiny model",
    f"{SWIFT} --external_plugins geo_orm_plugin.py --reward_funcs geo_step {TOOLS_TURNS} 8 "
    "--dataset swift_train.jsonl ...": SWIFT_HOW,
    SWIFT_DOC + " ...": SWIFT_HOW,
    f"{SWIFT_DOC} {TOOLS_TURNS} 8 ...": SWIFT_HOW,
    f"{SWIFT} --external_plugins {PLUGIN} --reward_funcs geo_step {TOOLS_TURNS} 8 "
    "--dataset swift_train.jsonl …": SWIFT_HOW,
    "python3 -m venv swift-env": SWIFT_ENV,
    "swift-env/bin/pip install torch==2.14.1 torchvision==0.29.1 -e '.[swift]'": SWIFT_ENV,
    f"MAX_PIXELS=4096 swift-env/bin/{SWIFT} --model DIR --model_type qwen3_vl --dataset swift_train.jsonl "
    f"--external_plugins {PLUGIN} --reward_funcs geo_step {TOOLS_TURNS} 3 --num_generations 2 "
    "--per_device_train_batch_size 2 --max_steps 1 --use_vllm false --tuner_type full --torch_dtype float32 "
    "--beta 0 --max_completion_length 8 --log_completions true --report_to none --check_model false "
    "--output_dir swift-out": SWIFT_HOW,
    "python bench/learning_bench.py [--json]": "the learning benchmark, ~10 min: BENCH_SMOKE runs its stages",
    BENCH_SMOKE: "run as written",
}  # fmt: skip
DATA_TABLE = {  # the page's table of `geosleuth data` steps
    "geosleuth data sample DATASET --size N --seed S -o sample.jsonl [--road-csv roads.csv]":
        "run, DATASET N S -> data/train.jsonl 3 0, the brackets dropped (roads.csv: the test writes one)",
    "geosleuth data build-mcq DATASET -o mcq.jsonl --seed S": "run, DATASET S -> data/train.jsonl 0",
    "geosleuth data synthesize DATASET -o synth/ --observer-model … --planner-model …":
        "needs model servers: test_training_synthesis.py runs it against local fakes",
    "geosleuth data export-sft RUN_DIR -o sft.jsonl --to trl\\|llamafactory\\|swift "
    "--tool-format hermes\\|openai": "needs an eval or synthesis run: test_training_exports.py",
    "geosleuth data export-swift DATASET -o swift_train.jsonl [--prompt STYLE] [--tools a,b] "
    "[--model DIR] [--pixel-budget N --resize-factor 28|32]": "PLUGIN_EXPORT",
    "geosleuth eval … --samples 8": "needs a model server (an eval command; tests/eval)",
    "geosleuth data filter RUN_DIR": "needs an eval run with --samples: test_training_exports.py",
    "geosleuth data export-verl DATASET -o train.parquet --reward R [--model DIR]": "run by PREPARE",
    "geosleuth data verl-tool-config -o tools.yaml": "run by PREPARE",
    "geosleuth data export-swift DATASET -o swift_train.jsonl [--tools …] [--model DIR]":
        "run, DATASET DIR -> data/train.jsonl tiny, --tools … dropped (SWIFT_MODEL_EXPORT)",
    "geosleuth data export-verl --reward hierarchical": "an option named in prose, not a command",
    "geosleuth data …": "a name in prose",
}  # fmt: skip
HOW.update(DATA_TABLE)
SUBSTITUTE = {"train.jsonl": "data/train.jsonl", "MODEL_DIR": "tiny"}  # word -> word, in commands marked "->"


def _join(lines: list[str]) -> list[str]:
    """Continuation lines joined, comments after two spaces dropped."""
    out, current = [], ""
    for line in lines:
        continued = line.rstrip().endswith("\\")
        current += line.strip().removesuffix("\\").strip() + " " if continued else line.strip()
        if not continued:
            out.append(" ".join(current.partition("  #")[0].split()))
            current = ""
    return out


def doc_commands() -> list[str]:
    found: list[str] = []
    block: list[str] | None = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        fence = FENCE.match(line)
        if fence:
            if block is not None:
                found += [c for c in _join(block) if re.match(STARTS, c)]
            block = [] if block is None else None
            continue
        if block is not None and line.strip():
            block.append(line)
    inline = [" ".join(m.group(1).split()) for m in INLINE.finditer(DOC.read_text(encoding="utf-8"))]
    return found + [c for c in inline if len(c.split()) > 2 or "/" in c]  # `swift rlhf` alone is a name


def example_commands() -> list[str]:
    found: list[str] = []
    for path in sorted(EXAMPLES.rglob("*")):
        if path.suffix not in (".sh", ".py"):
            continue
        lines = path.read_text(encoding="utf-8").splitlines()[:30]
        for i, line in enumerate(lines):
            match = HEADER.match(line)
            if not match or (path.suffix == ".sh") != line.startswith("#"):
                continue  # a shell script's usage is in its comments, a Python file's in its docstring
            block = [match.group(1)]
            while block[-1].rstrip().endswith("\\"):
                i += 1
                block.append(lines[i].lstrip("# "))
            found += _join(block)
    return found


def training_commands() -> list[str]:
    return list(dict.fromkeys(doc_commands() + example_commands()))


def test_every_training_command_is_known_and_gpu_commands_have_a_cpu_form() -> None:
    commands = training_commands()
    assert set(commands) == set(HOW), (set(commands) - set(HOW), set(HOW) - set(commands))
    text = DOC.read_text(encoding="utf-8")
    # the GPU command and its CPU form sit in one block, and the page says which needs a GPU
    block = text[text.index(TRL_GPU.split(" --data")[0]) :]
    assert "# GPU" in block.split("```")[0] and "needs a GPU" in text and "needs GPUs and vLLM" in text
    # the verl reward-manager overrides the page shows are the launch script's own
    script = (EXAMPLES / "verl" / "grpo_single_node.sh").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"^```\n(.*?)^```", text, re.S | re.M) if b.startswith("reward."))
    assert all(o.split("=")[0] + "=" in script for o in block.split())


def _run(
    command: str, cwd: Path, env: dict[str, str], timeout: int = 600
) -> subprocess.CompletedProcess[str]:
    run = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert run.returncode == 0, f"{command}\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    return run


def _run_fail(command: str, cwd: Path, env: dict[str, str]) -> str:
    run = subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 1, run.stdout[-2000:]
    return run.stderr


def _substituted(command: str, words: dict[str, str]) -> str:
    """``command`` with whole words replaced (its words hold no spaces; quoting stays as written)."""
    return " ".join(words.get(w, w) for w in command.split(" "))


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The tiny model (built by the page's command), the data files, the checkout's examples and bench."""
    pytest.importorskip("trl")
    pytest.importorskip("verl")
    from PIL import Image

    ws = tmp_path_factory.mktemp("train_docs")
    (ws / "examples").symlink_to(ROOT / "examples")
    (ws / "bench").symlink_to(ROOT / "bench")
    venv_bin = Path(sys.executable).parent  # python, python3 and geosleuth, as an activated venv has them
    env = {
        **os.environ,
        "PATH": f"{venv_bin}:{os.environ['PATH']}",
        "HF_HUB_OFFLINE": "1",
        "TRL_EXPERIMENTAL_SILENCE": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "GEOSLEUTH_TOOL_CACHE_MODE": "off",
        "HOME": str(ws / "home"),  # `~/data/geosleuth` of the examples' defaults lands here
    }
    _run(TINY, ws, env)
    places = [(48.8566, 2.3522, "France", "Paris"), (52.52, 13.405, "Germany", "Berlin"),
              (40.4168, -3.7038, "Spain", "Madrid"), (35.6762, 139.6503, "Japan", "Tokyo"),
              (40.7128, -74.006, "United States", "New York")]  # fmt: skip
    (ws / "data" / "img").mkdir(parents=True)
    for name, part in (("train", places[:4]), ("val", places[4:])):
        rows = []
        for i, (lat, lon, country, city) in enumerate(part):
            Image.new("RGB", (320, 240), (40 * i, 90, 160)).save(ws / "data" / "img" / f"{name}{i}.png")
            labels = {"country": country, "city": city}
            rows.append(
                {"id": f"{name}{i}", "image": f"img/{name}{i}.png", "lat": lat, "lon": lon, "labels": labels}
            )
        (ws / "data" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return {"ws": ws, "env": env}


@pytest.mark.slow
def test_trl_cpu_command_trains_two_steps_on_the_tiny_model(workspace: dict[str, Any]) -> None:
    ws, env = workspace["ws"], workspace["env"]
    assert (ws / "tiny" / "model.safetensors").is_file() and (ws / "tiny" / "chat_template.jinja").is_file()
    _run(_substituted(TRL_CPU, SUBSTITUTE), ws, env)
    out = ws / "runs" / "grpo-trl" / "checkpoint-2"
    state = json.loads((out / "trainer_state.json").read_text())
    steps = [h for h in state["log_history"] if "loss" in h]
    assert state["global_step"] == 2 and len(steps) == 2 and (out / "model.safetensors").is_file()
    for h in steps:
        assert 0.0 <= h["rewards/geo_step/mean"] <= 1.0 and math.isfinite(h["loss"])
        assert "tools/call_frequency" in h and "geo/acc@750km" in h  # the tools are in TRL's loop
        assert 0 < h["completions/max_length"] <= 32  # TRL caps the whole completion, tool turns included
    # too few rows for one optimiser step (2 x 4 / 2 = 4 prompts): an error, not a run ending at step 0
    (ws / "data" / "one.jsonl").write_text((ws / "data" / "train.jsonl").read_text().splitlines(True)[0])
    few = _substituted(TRL_CPU, {"train.jsonl": "data/one.jsonl"}).replace("--grad-accum 1", "--grad-accum 4")
    run = subprocess.run(["bash", "-c", few], cwd=ws, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 1 and "has 1 usable rows" in run.stderr and "draws 4" in run.stderr


def _parquet(path: Path) -> list[dict[str, Any]]:
    return pq.read_table(path).to_pylist()


@pytest.mark.slow
def test_the_learning_bench_smoke_command_runs_every_stage(workspace: dict[str, Any]) -> None:
    from PIL import Image

    ws, env = workspace["ws"], workspace["env"]
    run = _run(BENCH_SMOKE, ws, env, timeout=900)
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert set(summary) == {"first_reward", "last_reward", "first_parse_rate", "last_parse_rate",
                            "tool_calls", "grpo_steps", "seconds"}  # fmt: skip
    assert summary["grpo_steps"] == 2 and isinstance(summary["tool_calls"], int) and summary["seconds"] > 0
    assert all(0.0 <= summary[k] <= 1.0 for k in ("first_reward", "last_reward", "first_parse_rate",
                                                  "last_parse_rate"))  # fmt: skip
    assert "synthesis kept 4 of 4" in run.stdout  # the cold-start trajectories came from `data synthesize`
    figures = [line for line in run.stdout.splitlines() if line.startswith(("reward (step)", "parse rate"))]
    assert len(figures) == 2 and not any("nan" in line for line in figures)  # no ratio to a 0, not a nan
    assert Image.open(ws / "lb-smoke" / "learning_curves.png").format == "PNG"
    (saved,) = (ws / "lb-smoke" / "grpo-out").glob("checkpoint-*/trainer_state.json")
    state = json.loads(saved.read_text())
    assert len([h for h in state["log_history"] if "rewards/geo_step/mean" in h]) == 2


@pytest.mark.slow
def test_verl_prepare_and_dry_run_keep_every_row_and_state_the_processor_frame(
    workspace: dict[str, Any],
) -> None:
    from PIL import Image

    from geosleuth.training.qwen.processors import load_processor

    ws, env = workspace["ws"], workspace["env"]
    _run(PREPARE, ws, env)
    out = ws / "data" / "verl"
    train, val = _parquet(out / "train.parquet"), _parquet(out / "val.parquet")
    assert len(train) == 4 and len(val) == 1  # no row lost
    assert "geocode" in (out / "tools.yaml").read_text()
    processor = load_processor(str(ws / "tiny"))
    for row in train:
        kwargs = row["extra_info"]["tools_kwargs"]["image_zoom_in_tool"]["create_kwargs"]
        assert Path(kwargs["image"]).is_file()  # `img/…` read relative to data/train.jsonl
        image = Image.open(io.BytesIO(row["images"][0]["bytes"]))
        grid = processor.image_processor(images=[image], return_tensors="np")["image_grid_thw"][0]
        patch = processor.image_processor.patch_size
        frame = (int(grid[2]) * patch, int(grid[1]) * patch)  # width, height the model sees
        assert f"({frame[0]}×{frame[1]} pixels)" in row["prompt"][0]["content"]
        assert tuple(kwargs["model_size"]) == frame
    run = _run(DRY_RUN, ws, env)
    summary = json.loads(run.stdout.strip().splitlines()[-1])
    assert summary["train"]["class"] == "GeoSleuthRLHFDataset"
    assert summary["train"]["rows"] == 4 and summary["val"]["rows"] == 1  # after the length filter
    assert summary["train"]["first_row_images"] == 1
    assert summary["tools"] == ["image_zoom_in_tool", "web_search", "geocode"]
    assert summary["tool_parser"] == "GeoSleuthHermesToolParser"
    assert summary["reward_manager"] == "GeoSleuthRewardManager" and summary["reward"] == {"reward": "step"}
    # the curriculum's phase switch, run from the page: DATA, MODEL and DRY_RUN exported first
    pq.write_table(pq.read_table(out / "train.parquet").slice(0, 2), out / "phase1.parquet")
    phase = "TRAIN_FILE=$DATA/phase1.parquet bash grpo_single_node.sh"
    words = {"grpo_single_node.sh": "examples/training/verl/grpo_single_node.sh"}
    run = _run("export DATA=data/verl MODEL=tiny DRY_RUN=1; " + _substituted(phase, words), ws, env)
    assert json.loads(run.stdout.strip().splitlines()[-1])["train"]["rows"] == 2
    # a model whose prompts all exceed max_prompt_length: the run stops, it never trains on nothing
    short = _run_fail(DRY_RUN + " data.max_prompt_length=8", ws, env)
    assert "dropped all 4 rows" in short
    # the multi-node launch: its overrides on top, composed and validated by verl for 4 nodes
    launch = _run(MULTI_LAUNCH, ws, env)
    assert json.loads(launch.stdout.strip().splitlines()[-1])["train"]["rows"] == 4


@pytest.mark.slow
def test_example_headers_run(workspace: dict[str, Any]) -> None:
    ws, env = workspace["ws"], workspace["env"]
    header = "DATASET=path/to/train.csv VAL=path/to/val.csv OUT=~/data/geosleuth bash prepare_data.sh"
    words = {
        "DATASET=path/to/train.csv": "DATASET=data/train.jsonl",
        "VAL=path/to/val.csv": "VAL=data/val.jsonl",
        "prepare_data.sh": "examples/training/verl/prepare_data.sh",
    }
    command = _substituted(header, words)
    _run(command, ws, env)  # OUT=~/data/geosleuth: HOME is the workspace's
    assert len(_parquet(ws / "home" / "data" / "geosleuth" / "train.parquet")) == 4
    # the page's table of data steps
    sample, mcq = list(DATA_TABLE)[:2]
    (ws / "roads.csv").write_text("country,road_km\nFR,1100000\nDE,830000\nES,680000\nJP,1220000\n")
    words = {
        "DATASET": "data/train.jsonl",
        "N": "3",
        "S": "0",
        "[--road-csv": "--road-csv",
        "roads.csv]": "roads.csv",
    }
    _run(_substituted(sample, words), ws, env)
    ids = [json.loads(line)["id"] for line in (ws / "sample.jsonl").read_text().splitlines()]
    assert len(set(ids)) == 3 and set(ids) <= {"train0", "train1", "train2", "train3"}
    _run(_substituted(mcq, words), ws, env)
    rows = [json.loads(line) for line in (ws / "mcq.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["answer_type"] == "choice" for r in rows)
    assert [r["choices"]["ABCD".index(r["answer"])] for r in rows] == ["France", "Germany", "Spain", "Japan"]
    # Ray's head and worker starts: a `ray` stub records what the script would start
    stub = ws / "stub"
    stub.mkdir(exist_ok=True)
    (stub / "ray").write_text('#!/bin/sh\necho "ray $*"\n')
    (stub / "ray").chmod(0o755)
    stub_env = {**env, "PATH": f"{stub}:{env['PATH']}"}
    script = "examples/training/verl/grpo_multi_node.sh"
    head = _run(f"ROLE=head bash {script}", ws, stub_env).stdout
    worker = _run(f"ROLE=worker HEAD_IP=10.0.0.1 bash {script}", ws, stub_env).stdout
    assert head.strip() == "ray start --head --port=6379 --num-gpus=8"
    merger = _run(MERGE.split(" --backend")[0] + " --help", ws, env).stdout  # the curriculum's merge step
    assert all(f"{flag} " in merger for flag in re.findall(r"--\w+", MERGE)) and "{fsdp,megatron}" in merger
    assert worker.strip() == "ray start --address=10.0.0.1:6379 --num-gpus=8"


SWIFT_CHECK = r"""
import json, shlex, sys
from transformers import HfArgumentParser
from swift.arguments import RLHFArguments
from swift.utils import import_external_file
from swift.utils.utils import _patch_get_type_hints  # what swift.utils.parse_args wraps its parser in

with _patch_get_type_hints():
    parser = HfArgumentParser([RLHFArguments])
results = []
for command in json.loads(sys.argv[1]):
    words = shlex.split(command)  # [VAR=VALUE ...] swift rlhf ARGS
    argv = [w for w in words[words.index("rlhf") + 1 :] if w not in ("...", "…")]
    ns, unknown = parser.parse_known_args(argv)
    for plugin in ns.external_plugins:
        import_external_file(plugin)
    from swift.rewards import orms
    from swift.rollout import multi_turns
    results.append({"unknown": unknown, "rlhf_type": ns.rlhf_type, "dataset": ns.dataset,
                    "rewards": [r for r in ns.reward_funcs if r in orms],
                    "scheduler": ns.multi_turn_scheduler in multi_turns if ns.multi_turn_scheduler else None,
                    "max_turns": ns.max_turns})
print(json.dumps(results))
"""


SWIFT_MODEL_EXPORT = "geosleuth data export-swift data/train.jsonl -o swift_train.jsonl --model tiny --json"
"""The engine table's export-swift command with its placeholders filled and its brackets dropped."""


@pytest.mark.slow
def test_export_swift_with_model_states_the_frame_the_tiny_processor_gives(workspace: dict[str, Any]) -> None:
    from PIL import Image
    from transformers import AutoImageProcessor

    ws, env = workspace["ws"], workspace["env"]
    report = json.loads(_run(SWIFT_MODEL_EXPORT, ws, env).stdout.strip().splitlines()[-1])
    assert report["written"] == 4 and set(report["image_frame"]["source"].values()) == {"model"}
    rows = [json.loads(line) for line in (ws / "swift_train.jsonl").read_text().splitlines()]
    # the size the tiny model's own image processor gives a 320x240 photo: its patch grid x patch size
    processor = AutoImageProcessor.from_pretrained(ws / "tiny")
    grid = processor(images=[Image.new("RGB", (320, 240))], return_tensors="np")["image_grid_thw"][0]
    assert rows[0]["model_size"] == [int(grid[2]) * processor.patch_size, int(grid[1]) * processor.patch_size]


@pytest.mark.slow
def test_swift_commands_parse_with_ms_swift_and_the_dataset_has_their_columns(
    workspace: dict[str, Any],
) -> None:
    ws, env = workspace["ws"], workspace["env"]
    _run(_substituted(PLUGIN_EXPORT, SUBSTITUTE), ws, env)
    rows = [json.loads(line) for line in (ws / "swift_train.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(Path(r["images"][0]).is_file() for r in rows)
    assert json.loads(rows[0]["solution"])["lat"] == pytest.approx(48.8566)
    assert [t["function"]["name"] for t in json.loads(rows[0]["tools"])] == SWIFT_TOOLS.split(",")
    if not (SWIFT_DEPS / "swift" / "rollout").is_dir():
        pytest.skip("ms-swift 4.x not installed in .swift-deps (scripts/test.sh installs it)")
    commands = [c for c, how in HOW.items() if how == SWIFT_HOW]
    # the plugin docstring's command runs from the plugin's folder
    words = {"geo_orm_plugin.py": "examples/training/swift/geo_orm_plugin.py"}
    commands = [_substituted(c, words) for c in commands]
    swift_env = {**env, "PYTHONPATH": os.pathsep.join([str(SWIFT_DEPS), env.get("PYTHONPATH", "")])}
    run = _run(f"python -c {shlex.quote(SWIFT_CHECK)} {shlex.quote(json.dumps(commands))}", ws, swift_env)
    results = json.loads(run.stdout.strip().splitlines()[-1])
    for command, result in zip(commands, results, strict=True):
        assert result["unknown"] == [] and result["rlhf_type"] == "grpo", command
        assert result["rewards"] == ["geo_step"] and result["dataset"] == ["swift_train.jsonl"], command
        if "--multi_turn_scheduler" in command:
            assert result["scheduler"] is True and result["max_turns"] in (3, 8), command
