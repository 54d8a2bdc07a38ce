"""Helpers shared by the harness tests: running a harness from its isolated dependency folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
