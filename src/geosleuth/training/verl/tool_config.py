"""verl tool-config YAML for geosleuth tools.

verl reads ``actor_rollout_ref.rollout.multi_turn.tool_config_path``: a list of tools, each
with ``class_name``, ``config`` (``type: native`` plus the class's own keys) and an OpenAI
``tool_schema``. verl validates the schema with a narrow model (property ``type``,
``description``, ``enum`` only), so richer JSON Schema (``anyOf`` for optional values,
``items`` of arrays, defaults) is folded into that shape here, the detail kept in the
description the model reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

TOOL_CLASS = "geosleuth.training.verl.tools.GeoSleuthTool"


def _types(prop: dict[str, Any]) -> str | list[str]:
    if "type" in prop:
        return prop["type"]
    options = prop.get("anyOf") or prop.get("oneOf") or []
    found = [o["type"] for o in options if isinstance(o, dict) and o.get("type") not in (None, "null")]
    unique = list(dict.fromkeys(t for t in found if isinstance(t, str)))
    if not unique:
        return "string"
    return unique[0] if len(unique) == 1 else unique


def _property(prop: dict[str, Any]) -> dict[str, Any]:
    """One property in verl's shape; what does not fit goes into the description."""
    out: dict[str, Any] = {"type": _types(prop)}
    notes: list[str] = []
    items = prop.get("items") or next(
        (o.get("items") for o in prop.get("anyOf", []) if isinstance(o, dict) and o.get("items")), None
    )
    if isinstance(items, dict) and items.get("type"):
        n = prop.get("minItems")
        notes.append(
            f"array of {n} {items['type']}s"
            if n and n == prop.get("maxItems")
            else f"array of {items['type']}s"
        )
    if "default" in prop and prop["default"] is not None:
        notes.append(f"default {prop['default']!r}")
    for key in ("minimum", "maximum"):
        if key in prop:
            notes.append(f"{key} {prop[key]}")
    description = prop.get("description") or ""
    if notes:
        description = f"{description} ({'; '.join(notes)})".strip()
    if description:
        out["description"] = description
    if "enum" in prop:
        out["enum"] = list(prop["enum"])
    return out


def verl_schema(openai_schema: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI function declaration reduced to what verl's ``OpenAIFunctionToolSchema`` accepts."""
    fn = openai_schema.get("function", openai_schema)
    params = fn.get("parameters") or {}
    props = {name: _property(p) for name, p in (params.get("properties") or {}).items()}
    return {
        "type": "function",
        "function": {
            "name": fn["name"],
            "description": fn.get("description") or fn["name"],
            "parameters": {
                "type": "object",
                "properties": props,
                "required": list(params.get("required") or []),
            },
        },
    }


def tool_config(
    schemas: Sequence[dict[str, Any]],
    settings_path: str | Path | None = None,
    max_text_chars: int | None = 4000,
    registry_factory: str | None = None,
    bbox_convention: str | None = None,
    timeout_s: float | None = None,
) -> dict[str, Any]:
    """The YAML document as a dict: one `GeoSleuthTool` entry per schema."""
    tools = []
    for schema in schemas:
        vs = verl_schema(schema)
        config: dict[str, Any] = {"type": "native", "tool": vs["function"]["name"]}
        if settings_path is not None:
            config["settings"] = str(settings_path)
        if registry_factory:
            config["registry_factory"] = registry_factory
        if max_text_chars:
            config["max_text_chars"] = int(max_text_chars)
        if bbox_convention:
            config["bbox_convention"] = bbox_convention
        if timeout_s:
            config["timeout_s"] = float(timeout_s)
        tools.append({"class_name": TOOL_CLASS, "config": config, "tool_schema": vs})
    return {"tools": tools}


def dump_tool_config(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
