"""Kill -9 a running eval, resume it, and get exactly the uninterrupted run's result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from eval_data import make_csv_dataset, write_plan
from hypothesis import given
from hypothesis import strategies as st

from geosleuth.eval.run.store import DIGEST, is_finished, text_digest

HERE = Path(__file__).resolve().parent
N = 60


def _dataset_and_plan(tmp_path: Path) -> tuple[Path, Path]:
    places = [(f"p{i:02d}", -60.0 + 2 * i, -170.0 + 5 * i, "", "") for i in range(N)]
    data = make_csv_dataset(tmp_path / "bench", places)
    plan = {}
    for i, (sid, lat, lon, _, _) in enumerate(places):
        plan[sid] = (
            {"raise": "boom"}
            if i % 7 == 0
            else {"lat": lat + 0.05 * i, "lon": lon, "sleep": 0.03, "confidence": (i % 10) / 10}
        )
    return data, write_plan(tmp_path / "plan.json", plan)


def _command(data: Path, run_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-c",
        "from geosleuth.cli.app import main; main()",
        "eval",
        str(data),
        "--out",
        str(run_dir),
        "--agent-fn",
        "eval_fake_agent:planned",
        "--concurrency",
        "4",
        "--no-report",
    ]


def _env(plan: Path) -> dict[str, str]:
    path = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "GEOSLEUTH_TEST_PLAN": str(plan), "PYTHONPATH": path}


def _lines(run_dir: Path) -> int:
    path = run_dir / "trajectories.jsonl"
    return path.read_bytes().count(b"\n") if path.exists() else 0


def _summary(run_dir: Path, plan: Path) -> dict:
    cmd = [
        sys.executable,
        "-c",
        "from geosleuth.cli.app import main; main()",
        "report",
        str(run_dir),
        "--json",
        "--no-html",
        "--no-plots",
    ]
    out = subprocess.run(cmd, env=_env(plan), capture_output=True, text=True, timeout=120, check=True)
    summary = json.loads(out.stdout)
    return {k: summary[k] for k in ("metrics", "status_counts", "n_finished", "calibration", "breakdowns")}


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path: Path) -> None:
    data, plan = _dataset_and_plan(tmp_path)
    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _command(data, killed), env=_env(plan), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 60
    while _lines(killed) < 15 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    partial = _lines(killed)
    assert 15 <= partial < N, partial

    resumed = subprocess.run(
        _command(data, killed), env=_env(plan), capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    ids = [json.loads(line)["sample_id"] for line in (killed / "trajectories.jsonl").read_text().splitlines()]
    assert sorted(ids) == sorted(f"p{i:02d}" for i in range(N)) and len(ids) == N

    clean = tmp_path / "clean"
    subprocess.run(_command(data, clean), env=_env(plan), capture_output=True, timeout=120, check=True)
    assert _summary(killed, plan) == _summary(clean, plan)


@given(
    finished=st.lists(st.text(max_size=12), max_size=30),
    asked=st.lists(st.text(max_size=12), max_size=30),
)
def test_finished_ids_are_told_apart_exactly(finished: list[str], asked: list[str]) -> None:
    """A resume skips exactly the ids with a record: digests of any ids (empty, unicode, lone
    surrogates) answer as a set of the ids would."""
    keys = np.unique(np.frombuffer(b"".join(map(text_digest, finished)), dtype=DIGEST))
    assert is_finished(asked + finished, keys).tolist() == [sid in set(finished) for sid in asked + finished]
