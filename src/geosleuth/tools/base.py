"""Tool declaration: a typed Python function with a docstring becomes a tool.

The JSON schema the model sees (OpenAI function-calling format) is generated from the
signature; arguments from the model are validated against it, and a bad call becomes a
`ToolResult` error the model can read, never an exception that ends the loop.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_type_hints

from PIL import Image
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from geosleuth.secrets import redact_text
from geosleuth.tools.errors import ToolError

log = logging.getLogger(__name__)

__all__ = ["BBoxConvention", "Tool", "ToolContext", "ToolError", "ToolRegistry", "ToolResult", "tool"]

BBoxConvention = Literal["absolute", "relative1000"]


@dataclass
class ToolContext:
    """What a tool call may use besides its arguments: the query image and run settings."""

    image: Image.Image | None = None  # the query image at original resolution
    image_path: str | None = None
    image_source: bytes | None = None  # the encoded image when it has no path (MCP image_base64)
    model_scale: float = 1.0  # size of the image the model saw / original size
    model_size: tuple[int, int] | None = None  # exact (width, height) the model saw; wins over the scale
    bbox_convention: BBoxConvention = "absolute"
    artifacts_dir: Path | None = None  # where tool-made images are written
    settings: Any = None  # tools.config.ToolSettings when the caller has one
    state: dict[str, Any] = field(default_factory=dict)  # per-trajectory scratch (e.g. POI ids seen)


@dataclass
class ToolResult:
    """Text and/or images returned to the model, plus structured data for logs and tests."""

    text: str = ""
    images: list[Image.Image] = field(default_factory=list)
    data: Any = None
    ok: bool = True
    error: str | None = None
    provider: str | None = None
    cache_hit: bool = False
    latency_s: float = 0.0
    replaced_surrogates: int = 0  # lone surrogates in the tool's text, replaced by U+FFFD

    @classmethod
    def failure(cls, message: str, provider: str | None = None) -> ToolResult:
        from geosleuth.tools.text import defuse  # messages quote arguments and provider bodies

        message = defuse(message)
        return cls(text=f"Error: {message}", ok=False, error=message, provider=provider)


ToolFn = Callable[..., Any]
BOUND_PARAMS = frozenset({"runtime"})
"""Parameters a registry fills (its shared providers, cache and settings: `Tool.bind`), never the model."""

_ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?\s*:\s*(.+)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into the summary and per-argument descriptions."""
    doc = inspect.cleandoc(doc or "")
    summary_lines: list[str] = []
    args: dict[str, str] = {}
    section = "summary"
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in {"args:", "arguments:", "parameters:"}:
            section = "args"
            continue
        if stripped.lower() in {"returns:", "raises:", "examples:"}:
            section = "other"
            continue
        if section == "summary":
            summary_lines.append(line)
        elif section == "args":
            m = _ARG_LINE.match(line)
            if m and not line.startswith("        "):
                current = m.group(1)
                args[current] = m.group(2).strip()
            elif current and stripped:
                args[current] += " " + stripped
    return "\n".join(summary_lines).strip(), args


def _inline_refs(schema: dict[str, Any]) -> dict[str, Any]:
    """Inline pydantic `$defs` so that every client (vLLM, OpenAI, MCP) accepts the schema."""
    defs = schema.pop("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(dict(defs[node["$ref"].split("/")[-1]]))
            return {k: walk(v) for k, v in node.items() if k != "title"}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


class Tool:
    """A callable tool with a generated schema and validated arguments."""

    def __init__(self, fn: ToolFn, name: str | None = None, description: str | None = None) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        summary, arg_docs = _parse_docstring(fn.__doc__ or "")
        self.description = description or summary
        self.wants_context = False
        self.needs: tuple[str, ...] = ()  # bound parameters the function takes
        self.bound: dict[str, Any] = {}
        hints = get_type_hints(fn, include_extras=True)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            annotation = hints.get(pname, Any)
            if annotation is ToolContext or pname == "ctx":
                self.wants_context = True
                continue
            if pname in BOUND_PARAMS:
                self.needs += (pname,)
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (annotation, Field(default, description=arg_docs.get(pname)))
        self.args_model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{self.name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        schema = _inline_refs(self.args_model.model_json_schema())
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        self.parameters: dict[str, Any] = schema

    def bind(self, **values: Any) -> Tool:
        """This tool with its bound parameters filled (``runtime=``): what a registry holds."""
        unknown = set(values) - set(self.needs)
        if unknown:
            raise TypeError(f"{self.name} takes no bound parameter {', '.join(sorted(unknown))}")
        bound = copy.copy(self)
        bound.bound = {**self.bound, **values}
        return bound

    def renamed(self, name: str) -> Tool:
        """The same tool offered under another name (a paper's name for it: an alias)."""
        alias = copy.copy(self)
        alias.name = name
        return alias

    def schema(self) -> dict[str, Any]:
        """OpenAI function-calling declaration."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    def validate(self, arguments: dict[str, Any] | None) -> dict[str, Any]:
        """Check the model's arguments; raise ToolError with a message the model can act on."""
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise ToolError(f"{self.name} expects a JSON object of arguments, got {type(arguments).__name__}")
        try:
            model = self.args_model.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from None
        return {k: getattr(model, k) for k in self.args_model.model_fields}

    async def __call__(self, arguments: dict[str, Any] | None, ctx: ToolContext | None = None) -> ToolResult:
        """Validate, run (sync tools in a thread), and turn every failure into a ToolResult."""
        start = time.perf_counter()
        try:
            kwargs = self.validate(arguments)
            missing = [name for name in self.needs if name not in self.bound]
            if missing:
                raise ToolError(f"{self.name} is not bound to a registry (missing {', '.join(missing)})")
            kwargs.update(self.bound)
            if self.wants_context:
                kwargs["ctx"] = ctx or ToolContext()
            if inspect.iscoroutinefunction(self.fn):
                out = await self.fn(**kwargs)
            else:
                out = await asyncio.to_thread(self.fn, **kwargs)
            result = _coerce_result(out)
        except ToolError as exc:
            result = ToolResult.failure(str(exc))
        except Exception as exc:  # a tool bug must not end the trajectory
            result = ToolResult.failure(redact_text(f"{self.name} failed: {type(exc).__name__}: {exc}"))
        result.latency_s = time.perf_counter() - start
        return _safe_result(result)


def _safe_result(result: ToolResult) -> ToolResult:
    """Every tool's text as it may enter a conversation: valid Unicode (lone surrogates replaced),
    keys redacted, tags and fences defused."""
    from geosleuth.core.surrogates import clean_text
    from geosleuth.tools.text import defuse, fence_safe

    text, replaced = clean_text(result.text)
    result.text = fence_safe(redact_text(text))
    if result.error:
        error, n = clean_text(result.error)
        result.error = defuse(redact_text(error))
        replaced += n
    if replaced:
        log.warning("replaced %d lone surrogate(s) in the output of a tool by U+FFFD", replaced)
    result.replaced_surrogates += replaced
    return result


def _coerce_result(out: Any) -> ToolResult:
    if isinstance(out, ToolResult):
        return out
    if isinstance(out, Image.Image):
        return ToolResult(images=[out])
    if isinstance(out, str):
        return ToolResult(text=out)
    import json

    return ToolResult(text=json.dumps(out, ensure_ascii=False, default=str), data=out)


def tool(
    fn: ToolFn | None = None, *, name: str | None = None, description: str | None = None
) -> Tool | Callable[[ToolFn], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=...)`` turns a typed function into a Tool."""
    if fn is not None:
        return Tool(fn, name=name, description=description)
    return lambda f: Tool(f, name=name, description=description)


class ToolRegistry:
    """Named tools; the agent asks it for schemas and dispatches calls through it.

    ``aliases`` ({alias: tool name}) are other names of registered tools, such as a paper's own
    names (Thinking with Map's ``image_zoom_tool``): ``get`` and ``subset`` answer to them with
    the tool renamed, so a model trained on those names calls the same tool. ``names`` lists
    the registered tools only.
    """

    def __init__(
        self, tools: Iterable[Tool] = (), runtime: Any = None, aliases: Mapping[str, str] | None = None
    ) -> None:
        self._tools: dict[str, Tool] = {}
        self.runtime = runtime  # shared providers, cache and settings (tools.runtime.ToolRuntime)
        self.aliases: dict[str, str] = dict(aliases or {})
        for t in tools:
            self.register(t)

    def register(self, t: Tool) -> Tool:
        self._tools[t.name] = t
        return t

    def get(self, name: str) -> Tool | None:
        found = self._tools.get(name)
        if found is None and self.aliases.get(name) in self._tools:
            return self._tools[self.aliases[name]].renamed(name)
        return found

    def names(self) -> list[str]:
        return list(self._tools)

    def alias_names(self) -> list[str]:
        """The aliases whose tool this registry holds."""
        return [a for a, target in self.aliases.items() if target in self._tools and a not in self._tools]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.get(name) is not None

    def __len__(self) -> int:
        return len(self._tools)

    def subset(self, names: Iterable[str]) -> ToolRegistry:
        names = list(names)
        missing = [n for n in names if n not in self]
        if missing:
            raise KeyError(f"unknown tool(s): {', '.join(missing)}; available: {', '.join(self._tools)}")
        chosen = (self.get(n) for n in names)
        return ToolRegistry((t for t in chosen if t is not None), runtime=self.runtime, aliases=self.aliases)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self._tools.values()]

    async def call(
        self, name: str, arguments: dict[str, Any] | None, ctx: ToolContext | None = None
    ) -> ToolResult:
        t = self.get(name)
        if t is None:
            return ToolResult.failure(f"unknown tool {name!r}; available tools: {', '.join(self._tools)}")
        return await t(arguments, ctx)
