"""Prompt styles as data files (``agent/prompts/<style>.yaml``), rendered with the tool list.

A style file names its default tools, tool-calling mode, bbox convention, turn budget and the
answer protocol the parser should expect; ``common.yaml`` holds the text every style shares.
Placeholders are ``{{name}}`` so the JSON examples in prompts need no escaping.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from geosleuth.agent.catalog import PROMPT_STYLES
from geosleuth.core.records import Task

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptStyle(BaseModel):
    """One published prompting style."""

    name: str
    description: str = ""
    tools: list[str] = Field(default_factory=list)
    tool_calling: Literal["native", "text"] = "text"
    bbox_convention: Literal["absolute", "relative1000"] = "absolute"
    max_turns: int = 8
    max_tool_calls: int | None = None
    protocol: str | None = None
    answer_example: str = ""  # a final answer in the style's format (which protocols can read it)
    verifier_view: Literal["full", "evidence"] = "evidence"  # what a test-time verifier reads of each sample
    system: str
    user: str


def render(template: str, **values: Any) -> str:
    """Fill ``{{name}}`` placeholders; unknown ones are left visible so a typo shows up in tests."""
    return _PLACEHOLDER.sub(
        lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template
    )


def prompt_file(package: str, name: str, required: frozenset[str] = frozenset()) -> dict[str, Any]:
    """``<package>/prompts/<name>.yaml``, a packaged prompt file: a mapping with the ``required`` keys."""
    text = resources.files(package).joinpath("prompts", f"{name}.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or not required <= set(data):
        keys = ", ".join(f"'{k}'" for k in sorted(required))
        raise ValueError(f"prompt file {name}.yaml must be a mapping" + (f" defining {keys}" if keys else ""))
    return data


def _read(name: str) -> dict[str, Any]:
    return prompt_file("geosleuth.agent", name)


def available_styles() -> list[str]:
    """Every registered style name: the shipped ones, then run-time and entry-point ones."""
    return PROMPT_STYLES.names()


def is_style_file(name: str) -> bool:
    """Whether ``--prompt`` names a YAML file rather than a registered style."""
    return name.endswith((".yaml", ".yml"))


def style_from(data: Any, where: str, default_name: str) -> PromptStyle:
    """A style from a registered entry (a style file, a mapping, a `PromptStyle`); the error says
    where and what is wrong."""
    if isinstance(data, PromptStyle):
        return data
    if isinstance(data, str | Path):
        return style_file(Path(data), default_name)
    if not isinstance(data, dict):
        raise ValueError(f"prompt style {where} must be a mapping with 'system' and 'user' texts")
    try:
        return PromptStyle.model_validate({"name": default_name, **data})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"prompt style {where} is invalid: {problems}") from None


def style_file(path: Path, default_name: str | None = None) -> PromptStyle:
    """A style file: a shipped one or a user's own (for example an author's exact published
    template), named by its ``name`` key, else ``default_name``, else the file's stem."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read prompt style file {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"prompt style file {path} is not valid YAML: {exc}") from None
    return style_from(data, f"file {path}", default_name or path.stem)


@lru_cache(maxsize=32)
def load_style(name: str) -> PromptStyle:
    """A style by registered name, by the path of a YAML file (its ``name`` defaults to the file's
    stem), or as ``package.module:STYLE``; the error lists the registered ones."""
    if is_style_file(name):
        return style_file(Path(name))
    return style_from(PROMPT_STYLES.get_entry(name), repr(name), name)


@lru_cache(maxsize=1)
def common() -> dict[str, str]:
    return {k: str(v) for k, v in _read("common").items()}


@lru_cache(maxsize=1)
def verifier_prompt() -> dict[str, str]:
    return {k: str(v) for k, v in _read("verifier").items()}


def tools_section(schemas: list[dict[str, Any]], tool_calling: str) -> str:
    """The tool list rendered from the registry's schemas for the chosen calling mode."""
    if not schemas:
        return ""
    if tool_calling == "text":
        lines = "\n".join(json.dumps(s, ensure_ascii=False) for s in schemas)
        return render(common()["tools_text"], tool_schemas=lines).strip()
    listing = "\n".join(f"- {s['function']['name']}: {s['function'].get('description', '')}" for s in schemas)
    return render(common()["tools_native"], tool_list=listing).strip()


def task_extra(task: Task) -> str:
    """What the task adds to the question: choices, the answer level, a hint."""
    c = common()
    parts = []
    if task.choices:
        letters = "\n".join(f"{chr(65 + i)}. {choice}" for i, choice in enumerate(task.choices))
        parts.append(render(c["task_choice"], choices=letters).strip())
    if task.answer_level:
        parts.append(render(c["task_level"], level=task.answer_level))
    if task.hint:
        parts.append(render(c["task_hint"], hint=task.hint))
    return "\n".join(parts)


def build_prompts(
    style: PromptStyle,
    task: Task,
    schemas: list[dict[str, Any]],
    tool_calling: str,
    bbox_convention: str,
    image_size: tuple[int, int],
    observer: str | None = None,
) -> tuple[str, str]:
    """System and user text for one trajectory (``observer``: who describes the image to a
    text-only model)."""
    c = common()
    has_zoom = any("bbox_2d" in s["function"].get("parameters", {}).get("properties", {}) for s in schemas)
    bbox_note = ""
    if has_zoom:
        bbox_note = render(
            c[f"bbox_{bbox_convention}"], image_width=image_size[0], image_height=image_size[1]
        )
    system = render(
        style.system,
        tools_section=tools_section(schemas, tool_calling),
        bbox_note=bbox_note,
        tool_output_notice=c["tool_output_notice"] if schemas else "",
    )
    if observer is not None:
        system = f"{system}\n\n{render(c['observer_note'], observer=observer)}"
    user = render(style.user, task_extra=task_extra(task))
    return _tidy(system), _tidy(user)


def _tidy(text: str) -> str:
    """Collapse the blank lines left by empty sections."""
    return re.sub(r"\n{3,}", "\n\n", text).strip()
