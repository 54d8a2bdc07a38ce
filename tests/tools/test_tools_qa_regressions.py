"""Regressions found by end-to-end QA of `geosleuth tool …` through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app


def test_ocr_region_errors_name_the_region_argument(tmp_path: Path) -> None:
    image = tmp_path / "a.png"
    Image.new("RGB", (320, 240), "white").save(image)
    args = json.dumps({"region": [200, 200, 10, 10]})
    result = CliRunner().invoke(
        app, ["tool", "ocr", "--image", str(image), "--args", args, "--out", str(tmp_path)]
    )
    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert error.startswith("region [200.0, 200.0, 10.0, 10.0] is inverted") and "bbox_2d" not in error
