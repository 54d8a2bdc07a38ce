"""Tools the agent calls (zoom, geocode, POI, search, maps, EXIF, OCR), their providers,
cache and MCP server. `build_registry` is the entry point."""

from __future__ import annotations

from typing import Any

__all__ = ["build_registry"]


def __getattr__(name: str) -> Any:
    """Import the registry lazily so that `geosleuth.tools.base` stays light."""
    if name == "build_registry":
        from geosleuth.tools.registry import build_registry

        return build_registry
    raise AttributeError(name)
