"""Helpers shared by the harness tests: running a harness from its isolated dependency folder."""

from __future__ import annotations

import base64
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PIL import Image
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.testing import Step, reply

ROOT = Path(__file__).resolve().parents[2]

PHOTOS = [  # id, true lat, true lon, country, city
    ("paris", 48.8566, 2.3522, "France", "Paris"),
    ("tokyo", 35.6812, 139.7671, "Japan", "Tokyo"),
    ("sydney", -33.8688, 151.2093, "Australia", "Sydney"),
]


def deps_env(folder: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a subprocess that imports a harness from ``folder`` and this clone's sources."""
    env = {**os.environ, **(extra or {})}
    paths = [str(ROOT / folder), str(ROOT / "src"), str(Path(__file__).parent)]
    env["PYTHONPATH"] = os.pathsep.join([*paths, *filter(None, [env.pop("PYTHONPATH_EXTRA", "")])])
    env["HF_HUB_OFFLINE"] = "1"
    env["HF_DATASETS_OFFLINE"] = "1"
    env["INSPECT_LOG_LEVEL"] = "warning"
    return env


def run_python(
    folder: str, args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: int = 420
) -> subprocess.CompletedProcess[str]:
    """Run this interpreter with a harness's dependency folder on PYTHONPATH (and ``env`` added)."""
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=deps_env(folder, env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def photo_red(request: dict[str, Any]) -> str:
    """The red channel of the top-left pixel of the photo a chat request carries (a data URL), to
    the nearest multiple of 40 (a lossy encoding may shift a solid colour); "none" without one."""
    for message in request.get("messages", []):
        for part in message.get("content") if isinstance(message.get("content"), list) else []:
            url = (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
            if url.startswith("data:"):
                with Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1]))) as image:
                    return str(40 * round(image.convert("RGB").getpixel((0, 0))[0] / 40))
    return "none"


def photo_script(answers: dict[str, str]) -> Callable[[dict[str, Any]], Step]:
    """A fake server's script: each chat request is answered by the photo it carries."""
    return lambda request: reply(answers.get(photo_red(request), ""))


def score_cli(answers: dict[str, str], truth: Path, protocol: str, folder: Path) -> dict[str, float | None]:
    """The metrics `geosleuth score PRED --truth TRUTH -p PROTOCOL -f json` reports for these
    answers (by sample id); null where the data does not define a figure."""
    preds = folder / f"preds-{protocol}.jsonl"
    preds.write_text("".join(json.dumps({"id": k, "response": v}) + "\n" for k, v in answers.items()))
    cli = CliRunner().invoke(app, ["score", str(preds), "--truth", str(truth), "-p", protocol, "-f", "json"])
    assert cli.exit_code == 0, cli.output
    return dict(json.loads(cli.stdout)["metrics"])


def defined(metrics: dict[str, float | None]) -> dict[str, float]:
    """The figures that are not null."""
    return {k: v for k, v in metrics.items() if v is not None}
