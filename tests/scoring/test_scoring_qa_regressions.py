"""Regressions found by end-to-end QA of `geosleuth score` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from geosleuth.cli.app import app


def test_bare_lat_lon_are_the_prediction_when_truth_columns_are_explicit(tmp_path: Path) -> None:
    rows = [
        {"id": 1, "lat": "abc", "lon": 2, "true_lat": 1, "true_lon": 2},
        {"id": 2, "lat": 1, "lon": 2, "true_lat": 1, "true_lon": 2},
        {"id": 3, "lat": 10, "lon": 20, "ground_truth": {"lat": 10, "lon": 20}},
    ]
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(app, ["score", str(path), "--format", "json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["n"] == 3 and payload["parsed"] == 2 and payload["metrics"]["acc@1km"] == 66.67
    assert any("p.jsonl:1: predicted coordinate 'abc' is not a number" in w for w in payload["warnings"])
