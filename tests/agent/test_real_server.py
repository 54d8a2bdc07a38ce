"""The agent against a real OpenAI-compatible server: llama-cpp-python serving SmolLM2-135M on
127.0.0.1 (built and installed by scripts/test.sh; skipped with the reason where it is not).

A 135M text-only model cannot geolocate: these tests assert protocol facts, never accuracy —
the server accepts every request (each model turn has token usage), native and text tool
calls are parsed or recorded as errors, trajectories are complete and well-formed, the image
only ever reaches the model as the observer's text, and runs resume without redoing work.
"""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image, ImageDraw
from typer.testing import CliRunner

from geosleuth.agent import read_trajectories
from geosleuth.agent.observer import OBSERVE_TOOL
from geosleuth.cli.app import app
from geosleuth.core.records import Trajectory, TrajectoryStatus
from geosleuth.testing import LlamaCppServer, llamacpp_unavailable

REASON = llamacpp_unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "luzern_sign.png"
FAILED = {TrajectoryStatus.MODEL_ERROR, TrajectoryStatus.INPUT_ERROR, TrajectoryStatus.TIMEOUT}
FAST = ["--max-tokens", "24", "--temperature", "0"]  # keep the 135M model's turns short


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaCppServer]:
    with LlamaCppServer() as srv:
        yield srv


def cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def locate(server: LlamaCppServer, *args: str) -> tuple[int, str]:
    """``geosleuth locate`` of the example image with the real server's model, Thinking-with-Map."""
    model = ["--model", "smollm2-135m", "--base-url", server.base_url, "--prompt", "thinking_with_map"]
    return cli("locate", str(EXAMPLE), *model, *args)


def check_well_formed(traj: Trajectory, *, observed: bool = True) -> None:
    """Protocol facts every trajectory from the real server must satisfy."""
    assert traj.status not in FAILED, f"{traj.status}: {traj.error}"
    assert (
        traj.started_at is not None and traj.finished_at is not None and traj.finished_at >= traj.started_at
    )
    turns = traj.turns
    assert [t.index for t in turns] == list(range(len(turns)))
    if observed:
        first = turns[0]
        assert first.note == "observation" and first.tool_calls[0].name == OBSERVE_TOOL
        assert first.tool_calls[0].ok and first.tool_calls[0].result_text
        turns = turns[1:]
        assert "image_url" not in json.dumps(traj.messages)  # the text-only model never got pixels
    assert turns, "the model was asked at least once"
    for turn in turns:
        assert turn.usage.prompt_tokens > 0  # the server accepted and answered the request
        for call in turn.tool_calls:
            assert call.ok or call.error  # run, or recorded with the reason it could not be
    assert traj.messages[0]["role"] == "system"
    roles = {m["role"] for m in traj.messages}
    assert roles <= {"system", "user", "assistant", "tool"}


@pytest.mark.parametrize("calling", ["native", "text"])
def test_locate_in_observer_mode(server: LlamaCppServer, tmp_path: Path, calling: str) -> None:
    out = tmp_path / calling
    code, output = locate(
        server,
        "--tools",
        "geocode",  # one small schema: prompt evaluation dominates a CPU server's time
        "--observer",
        "offline",
        "--tool-calling",
        calling,
        "--max-turns",
        "2" if calling == "text" else "1",  # llama-cpp-python's grammar-bound tool path is slow on CPU
        "--out",
        str(out),
        "--json",
        *FAST,
    )
    assert code == 0, output
    (traj,) = list(read_trajectories(out / "trajectories.jsonl"))
    check_well_formed(traj)
    assert traj.metadata["tool_calling"] == calling
    if calling == "native" and traj.status == TrajectoryStatus.BUDGET_EXHAUSTED:
        (call,) = traj.turns[1].tool_calls  # a native call parsed, recorded as not run (budget spent)
        assert not call.ok and "budget" in (call.error or "")
    observation = traj.turns[0].tool_calls[0].result_text
    assert "6004 Luzern" in observation and "+41 41 410 23 45" in observation  # what the model read
    summary = json.loads(output[output.index("[") :])
    assert summary[0]["status"] == traj.status.value and summary[0]["tokens"] > 0


def test_image_sent_to_text_only_model_is_refused_with_a_hint(server: LlamaCppServer, tmp_path: Path) -> None:
    """The failure the issue reports: without an observer the base64 image overflows the context."""
    code, output = locate(
        server,
        "--json",
        *FAST,
    )
    assert code == 1
    (summary,) = json.loads(output[output.index("[") :])
    assert summary["status"] == "model_error"
    assert "you requested" in summary["error"] and "--observer offline" in summary["error"]


def make_dataset(folder: Path, n: int = 10) -> Path:
    """``n`` samples: the bundled sign, then small drawn scenes (short observations, fast turns)."""
    (folder / "images").mkdir(parents=True)
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country", "city"])
        for i in range(n):
            name = f"s{i:02d}.png"
            if i == 0:
                Image.open(EXAMPLE).save(folder / "images" / name)
            else:
                img = Image.new("RGB", (160, 120), (30 + 20 * i, 120, 200 - 10 * i))
                ImageDraw.Draw(img).rectangle((20, 60, 140, 110), fill=(90, 90, 90))
                img.save(folder / "images" / name)
            writer.writerow([f"s{i:02d}", f"images/{name}", 47.05, 8.31, "Switzerland", "Luzern"])
    return folder / "data.csv"


def eval_args(dataset: Path, out: Path, base_url: str) -> list[str]:
    return [
        "eval",
        str(dataset),
        "--out",
        str(out),
        "--model",
        "smollm2-135m",
        "--base-url",
        base_url,
        "--prompt",
        "direct",
        "--observer",
        "offline",
        "--max-turns",
        "1",
        "--max-tokens",
        "16",
        "--concurrency",
        "2",
        "--no-report",
    ]


def test_ten_sample_eval_survives_a_kill_and_resumes_without_redoing(
    server: LlamaCppServer, tmp_path: Path
) -> None:
    dataset = make_dataset(tmp_path / "data")
    out = tmp_path / "run"
    log = out / "trajectories.jsonl"
    cmd = [
        sys.executable,
        "-c",
        "from geosleuth.cli.app import main; main()",
        *eval_args(dataset, out, server.base_url),
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and len(log.read_text().splitlines()) >= 3:
            break
        time.sleep(0.2)
    killed = proc.poll() is None
    if killed:
        os.killpg(proc.pid, signal.SIGKILL)  # no chance to clean up, like a pre-empted job
    proc.wait(30)
    before = [line for line in log.read_text().splitlines() if line.strip()]
    kept = [line for line in before if line.endswith("}")]  # a torn last line is repaired on resume
    assert len(kept) >= 3

    code, output = cli(*eval_args(dataset, out, server.base_url))
    assert code == 0, output
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    ids = [r["sample_id"] for r in records]
    assert sorted(ids) == [f"s{i:02d}" for i in range(10)]  # every sample exactly once
    finished_first = {json.loads(line)["sample_id"]: line for line in kept}
    assert f"({len(finished_first)} already done" in output  # those were not run again …
    for line in log.read_text().splitlines():
        rec = json.loads(line)
        if rec["sample_id"] in finished_first:
            assert line == finished_first[rec["sample_id"]]  # … and their records are untouched
    for traj in read_trajectories(log):
        check_well_formed(traj)

    code, output = cli(*eval_args(dataset, out, server.base_url))  # a finished run: nothing to do
    assert code == 0 and "ran 0 sample(s)" in output and "(10 already done" in output
    assert len(log.read_text().splitlines()) == 10
    if killed:
        assert len(finished_first) < 10


def test_data_synthesize_end_to_end(server: LlamaCppServer, tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data", n=2)
    out = tmp_path / "synth"
    args = [
        "data",
        "synthesize",
        str(dataset),
        "--out",
        str(out),
        "--observer",
        "offline",
        "--planner-model",
        "smollm2-135m",
        "--planner-base-url",
        server.base_url,
        "--max-steps",
        "1",
        "--max-tokens",
        "24",
        "--concurrency",
        "1",
    ]
    code, output = cli(*args)
    assert code == 0, output
    report = json.loads(output[output.index("{") :])
    assert report["samples"] == report["attempted"] == 2
    kept, rejected = report["kept"], report["rejected"]
    assert kept + sum(rejected.values()) == 2
    assert "model_error" not in rejected and "input_error" not in rejected  # every request was accepted
    assert set(rejected) <= {
        "no_answer",
        "no_tool_call",
        "too_far",
        "invalid_tool_call",
        "max_steps",
        "observer_empty",
    }
    lines = (out / "rejected.jsonl").read_text().splitlines() if (out / "rejected.jsonl").exists() else []
    assert all(json.loads(line)["detail"] is not None for line in lines)
    for traj in (
        read_trajectories(out / "trajectories.jsonl") if (out / "trajectories.jsonl").exists() else []
    ):
        assert traj.model == "synth:offline+smollm2-135m" and traj.messages[-1]["role"] == "assistant"
    code, output = cli(*args)  # resumable: nothing is attempted again
    assert code == 0 and json.loads(output[output.index("{") :])["skipped_already_done"] == 2
