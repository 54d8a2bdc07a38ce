"""Front doors for the evaluation harnesses researchers already run (inspect_ai, lmms-eval).

Each harness drives its own loop; geosleuth supplies the dataset (any layout its loader reads),
the prompt, optionally the agent loop with tools, and the scoring: every protocol's numbers
come from the same engine as ``geosleuth score``. The harnesses are optional dependencies,
imported only by the modules that adapt to them.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def lmms_eval_tasks_folder() -> Path:
    """The shipped lmms-eval task folder (``--include_path``), found without importing lmms-eval."""
    return Path(str(resources.files("geosleuth.integrations").joinpath("lmms_eval", "tasks")))
