"""`geosleuth compare`: side-by-side metrics with paired significance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from eval_data import PLACES, make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.report.compare import compare_runs, mcnemar_p


def _run(tmp_path: Path, data: Path, name: str, right: set[str], monkeypatch: pytest.MonkeyPatch) -> Path:
    plan = {
        sid: ({"lat": lat, "lon": lon, "country": country} if sid in right else {"lat": 0.0, "lon": 0.0})
        for sid, lat, lon, country, _ in PLACES
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / f"{name}.json", plan)))
    out = tmp_path / name
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(out), "--agent-fn", "eval_fake_agent:planned", "--no-report"]
    )
    assert result.exit_code == 0, result.output
    return out


def test_compare_two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    a = _run(tmp_path, data, "a", {"paris", "berlin"}, monkeypatch)
    b = _run(tmp_path, data, "b", {"paris", "berlin", "tokyo", "nyc", "sydney", "cairo"}, monkeypatch)
    result = compare_runs([a, b])
    assert result["n_common"] == 8
    assert result["runs"][0]["metrics"]["acc@1km"] == 25.0 and result["runs"][1]["metrics"]["acc@1km"] == 75.0
    test = result["comparisons"][0]["tests"]["acc@1km"]
    assert test["diff"] == 50.0 and (test["only_baseline"], test["only_other"]) == (0, 4)
    assert test["mcnemar_p"] == pytest.approx(0.125)
    assert 0 < test["ci95"][0] <= 50.0 <= test["ci95"][1]
    cli = CliRunner().invoke(app, ["compare", str(a), str(b), "--out", str(tmp_path / "cmp")])
    assert cli.exit_code == 0, cli.output
    assert "| acc@1km (%) | 25.00 | 75.00 |" in cli.output
    assert json.loads((tmp_path / "cmp" / "compare.json").read_text())["n_common"] == 8


def test_compare_needs_two_runs(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["compare", str(tmp_path)])
    assert result.exit_code == 2 and "at least two" in result.output


def test_mcnemar_identical_runs() -> None:
    hits = np.array([True, False, True])
    assert mcnemar_p(hits, hits) == 1.0


def test_paired_bootstrap_brackets_the_difference_and_is_seeded() -> None:
    import numpy as np

    from geosleuth.eval.report.compare import paired_bootstrap

    rng = np.random.default_rng(1)
    a = rng.random(5000) < 0.4
    b = a | (rng.random(5000) < 0.2)  # b is never worse than a on any sample
    lo, hi = paired_bootstrap(a, b, seed=7)
    diff = float(b.mean() - a.mean())
    assert 0 < lo < diff < hi < 2 * diff
    assert paired_bootstrap(a, b, seed=7) == (lo, hi)
    assert paired_bootstrap(a, a) == (0.0, 0.0)


def test_compare_out_that_is_a_file_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    a = _run(tmp_path, data, "a", {"paris"}, monkeypatch)
    b = _run(tmp_path, data, "b", {"berlin"}, monkeypatch)
    blocker = tmp_path / "taken"
    blocker.write_text("x", encoding="utf-8")
    cli = CliRunner().invoke(app, ["compare", str(a), str(b), "--out", str(blocker)])
    assert cli.exit_code == 2, cli.output
    assert "error:" in cli.output and str(blocker) in cli.output
