"""Tools the agent calls (zoom, geocode, POI, search, maps, EXIF, OCR), their providers,
cache and MCP server. `build_registry` is the entry point."""

from __future__ import annotations

from geosleuth.lazy import lazy_getattr

__all__ = ["build_registry"]

__getattr__ = lazy_getattr(__name__, {"build_registry": "geosleuth.tools.registry"})
"""The registry is imported on first use, so that `geosleuth.tools.base` stays light."""
