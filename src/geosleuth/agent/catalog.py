"""The prompt-style registry: geosleuth's styles are the YAML files in ``agent/prompts``; a user's
style is a YAML file (or a mapping) registered by name, through the ``geosleuth.prompt_styles``
entry point, or named directly as ``package.module:STYLE``.

Light on purpose (no YAML or pydantic import): ``--help`` lists the names from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geosleuth.registry import Registry

PROMPTS_DIR = Path(__file__).with_name("prompts")
NOT_STYLES = frozenset({"common", "verifier", "observer"})
"""Prompt files that are not styles: shared text, the verifier's and the observer's prompts."""

StyleSource = Path | Mapping[str, Any] | Any
"""A style's definition: its YAML file, the mapping such a file holds, or a ``PromptStyle``."""

PROMPT_STYLES: Registry[StyleSource] = Registry("prompt style", "geosleuth.prompt_styles")


@PROMPT_STYLES.validator
def _as_source(name: str, value: Any) -> StyleSource:
    if isinstance(value, str):
        value = Path(value)
    if isinstance(value, Path):
        if not value.is_file():
            raise ValueError(f"style file {value} does not exist")
        return value
    if isinstance(value, Mapping) or type(value).__name__ == "PromptStyle":
        return value  # a mapping or a PromptStyle is checked field by field when the style loads
    raise TypeError(
        f"a prompt style is a YAML file path, a mapping or a PromptStyle, got {type(value).__name__}"
    )


for _file in sorted(PROMPTS_DIR.glob("*.yaml")):
    if _file.stem not in NOT_STYLES:
        PROMPT_STYLES.register(_file.stem, _file)
