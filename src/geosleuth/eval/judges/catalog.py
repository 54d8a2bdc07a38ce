"""The judge registry: LLM-as-a-judge tasks by name, light enough for ``eval --help``.

A judge is a `eval.judges.tasks.JudgeTask` (which samples it applies to, and how it asks the
judge model); a user's judge registers by name or through the ``geosleuth.judges`` entry point,
and ``eval --judges NAME`` runs it like a built-in.
"""

from __future__ import annotations

from typing import Any

from geosleuth.registry import Registry

JUDGES: Registry[Any] = Registry(  # of JudgeTask, which eval.judges.tasks validates
    "judge",
    "geosleuth.judges",
    builtins=dict.fromkeys(("levels", "path", "clues", "shapley", "errors"), "geosleuth.eval.judges.tasks"),
)
