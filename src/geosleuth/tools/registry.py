"""The tool suite: every tool the published agents use, wired to configured providers and the cache.

`build_registry(settings, names)` is what the agent, the CLI, the MCP server and the verl
adapter call. Providers are created on first use, so a registry with a real provider and
no key still builds; the call then returns a clear error telling the user which variable
to set.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from geosleuth.tools.base import ToolRegistry
from geosleuth.tools.builtin import BUILTIN_TOOLS
from geosleuth.tools.cache import ToolCache
from geosleuth.tools.catalog import TOOLS
from geosleuth.tools.config import PROVIDER_TOOLS, ToolSettings
from geosleuth.tools.runtime import ToolRuntime

TOOL_NAMES: tuple[str, ...] = tuple(t.name for t in BUILTIN_TOOLS)

TOOL_ALIASES: dict[str, str] = {
    "image_zoom_tool": "image_zoom_in_tool",  # Thinking with Map
    "web_search_tool": "web_search",  # Thinking with Map
    "search_web": "web_search",  # SpotAgent (App. A.1); GeoVista (its released eval/utils_agent_tool.py)
    "maps_geocode": "geocode",  # SpotAgent (App. A.1)
}
"""The papers' own names for geosleuth's tools: a style that offers a tool under its paper's name
gets the same tool, so a released checkpoint's calls resolve as it was trained to write them."""


def coerce_settings(settings: ToolSettings | Mapping[str, Any] | str | Path | None) -> ToolSettings:
    """Settings from an object, a mapping (e.g. a YAML section), a file path, or the environment."""
    if isinstance(settings, ToolSettings):
        return settings
    if settings is None or isinstance(settings, str | Path):
        return ToolSettings.load(settings)
    try:
        return ToolSettings.model_validate(dict(settings))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"invalid tool settings: {problems}") from None


def build_registry(
    settings: ToolSettings | Mapping[str, Any] | str | Path | None = None,
    names: Iterable[str] | None = None,
    cache: ToolCache | None = None,
) -> ToolRegistry:
    """The tool registry the agent uses; ``names`` picks a subset (in that order)."""
    settings = coerce_settings(settings)
    if cache is None:
        cache = ToolCache.from_settings(settings.cache, settings.cache_path())
    runtime = ToolRuntime(settings=settings, cache=cache)
    offered = TOOLS.load_all().values()  # the built-ins first, then users' registered tools
    registry = ToolRegistry(
        (t.bind(runtime=runtime) if "runtime" in t.needs else t for t in offered), aliases=TOOL_ALIASES
    )
    registry.runtime = runtime
    if names is None:
        return registry
    return registry.subset(list(names))


def provider_status(settings: ToolSettings) -> list[dict[str, str]]:
    """For `geosleuth tools list`: each tool, its provider, and whether that provider is usable."""
    rows: list[dict[str, str]] = []
    for name in TOOL_NAMES:
        family = PROVIDER_TOOLS.get(name)
        if family is None:
            rows.append({"tool": name, "provider": "local", "status": "ready"})
            continue
        choice = str(getattr(settings.providers, family))
        status = "ready"
        service = {"tavily", "serper", "brave", "google", "opencage", "amap"}
        if choice in service and not settings.api_key(choice):
            status = f"missing key: set GEOSLEUTH_{choice.upper()}_API_KEY"
        elif choice == "searxng" and not settings.base_url("searxng", None):
            status = "missing URL: set GEOSLEUTH_SEARXNG_BASE_URL"
        elif choice == "tesseract":
            import shutil

            status = "ready" if shutil.which("tesseract") else "tesseract binary not found"
        rows.append({"tool": name, "provider": choice, "status": status})
    return rows
