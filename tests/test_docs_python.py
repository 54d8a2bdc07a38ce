"""docs/python-api.md's examples run as written: its Python blocks, in order, as one session
(a notebook's), from a fresh clone's root, like tests/test_docs_commands.py runs the CLI's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from test_docs_commands import ROOT, clone  # noqa: F401  (the fresh-clone fixture)

PAGE = ROOT / "docs" / "python-api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks() -> list[str]:
    return BLOCK.findall(PAGE.read_text(encoding="utf-8"))


def test_the_page_is_linked_from_the_readme_and_shows_every_function() -> None:
    assert "docs/python-api.md" in (ROOT / "README.md").read_text(encoding="utf-8")
    code = "\n".join(python_blocks())
    for call in ("locate(", "score(", "load_dataset(", "evaluate(", "reward(", "ToolRegistry("):
        assert f"geosleuth.{call}" in code, call


@pytest.mark.slow
def test_the_python_examples_run_as_written(clone: Path) -> None:  # noqa: F811
    script = clone / "python_api_examples.py"
    script.write_text("\n".join(python_blocks()), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(clone / "src")}
    env.pop("OPENAI_BASE_URL", None)
    result = subprocess.run(
        [sys.executable, str(script)], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert result.returncode == 0, f"{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    lines = result.stdout.splitlines()
    assert lines[0].startswith("ok Luzern CH 47.0") and lines[2].startswith("889 11.14")
    assert "436 m" in lines and (clone / "runs" / "python-api" / "summary.md").exists()
