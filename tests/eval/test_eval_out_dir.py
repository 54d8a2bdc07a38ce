"""`eval --out` writes only a run of its own (issue 41, low): a folder that is not a run is
refused, not overwritten; two processes never write one run; a run that fails before its first
sample leaves nothing behind that `merge` or a resume would take for a run."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.run.runlock import run_lock


def test_an_existing_folder_that_is_not_a_run_is_refused(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    mine = tmp_path / "notes"
    (mine / "html").mkdir(parents=True)
    (mine / "summary.md").write_text("my own notes")
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(mine), "--agent-fn", "eval_fake_agent:planned"]
    )
    assert result.exit_code == 2 and "is not a geosleuth run" in result.output
    assert (mine / "summary.md").read_text() == "my own notes" and sorted(p.name for p in mine.iterdir()) == [
        "html",
        "summary.md",
    ]


def test_a_second_eval_on_a_run_being_written_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    plan = {sid: {"lat": 0.0, "lon": 0.0, "raw": "x"} for sid in ("paris", "berlin", "tokyo", "nyc")}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    args = [
        "eval",
        str(data),
        "--out",
        str(tmp_path / "run"),
        "--agent-fn",
        "eval_fake_agent:planned",
        "--no-report",
    ]
    assert CliRunner().invoke(app, [*args, "--limit", "2"]).exit_code == 0
    with run_lock(tmp_path / "run"):  # another process's run, as far as the CLI can tell
        second = CliRunner().invoke(app, args)
    assert second.exit_code == 2 and "being written by another geosleuth eval" in second.output
    assert (tmp_path / "run" / "run.json").exists()  # the holder's run is left alone
    assert CliRunner().invoke(app, args).exit_code == 0  # once released, the run resumes


def test_a_run_that_fails_before_its_first_sample_leaves_no_run(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", str(data), "--out", str(out), "--model", "m", "--base-url", f"http://127.0.0.1:{port}/v1"],
    )
    assert result.exit_code == 1 and "cannot reach" in result.output
    assert not out.exists()  # no run.json for `merge` to refuse later
    assert "was not left a run" in result.output and "finished samples are saved" not in result.output
