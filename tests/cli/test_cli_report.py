"""The report a new user reads: no empty tool table, extra dataset columns as breakdowns, the
PNG plots inside the HTML report, and the truth's country labelled as such."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.cli.app import app

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from eval_data import PLACES, make_csv_dataset, write_plan  # noqa: E402


def _dataset_with_extra_columns(folder: Path) -> Path:
    make_csv_dataset(folder)
    rows = list(csv.DictReader((folder / "data.csv").open()))
    for i, row in enumerate(rows):
        row["setting"] = "urban" if i < 5 else "rural"
        row["photo_id"] = f"p{i}"  # unique per row: groups nothing, so no breakdown
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return folder


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    data = _dataset_with_extra_columns(tmp_path / "bench")
    plan = {sid: {"lat": lat, "lon": lon} for sid, lat, lon, *_ in PLACES}
    plan["lima"] = {"lat": 0.0, "lon": 0.0}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(out), "--agent-fn", "eval_fake_agent:planned"]
    )
    assert result.exit_code == 0, result.output
    return out


def test_no_tool_calls_means_no_empty_table(run_dir: Path) -> None:
    text = (run_dir / "summary.md").read_text()
    section = text.split("## Tool use", 1)[1].split("##", 1)[0]
    assert "No tool was called." in section and "| tool |" not in section


def test_extra_dataset_columns_are_breakdowns(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    setting = summary["breakdowns"]["setting"]
    assert setting["urban"]["n"] == 5 and setting["rural"]["n"] == 3
    assert setting["urban"]["acc@1km"] == 100.0  # lima (row 6, rural) is the one wrong answer
    assert setting["rural"]["acc@1km"] == pytest.approx(200 / 3, abs=0.01)
    assert "photo_id" not in summary["breakdowns"] and "image" not in summary["breakdowns"]
    assert "## By setting" in (run_dir / "summary.md").read_text()


def test_the_html_report_embeds_the_plots(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "error_cdf.png" in summary["outputs"]["plots"]
    index = (run_dir / "html" / "index.html").read_text()
    assert "<h2>Plots</h2>" in index
    assert index.count('class="plot"') == len(summary["outputs"]["plots"])
    assert "data:image/png;base64,iVBORw0KGgo" in index  # PNG magic, base64
    assert "<th>true country</th>" in index


def test_turns_are_numbered_from_one_as_in_the_web_app(run_dir: Path) -> None:
    page = (run_dir / "html" / "samples" / "lima.html").read_text()
    assert "<h3>Turn 1</h3>" in page and "<h3>Turn 2</h3>" in page and "<h3>Turn 0</h3>" not in page
