"""What the tools of one registry share: settings, the cache, and providers created on first use."""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from geosleuth.tools.base import ToolError, ToolResult
from geosleuth.tools.cache import ToolCache
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.text import truncate, wrap_output


def make_provider(family: str, settings: ToolSettings) -> Any:
    """Instantiate the configured provider of one tool family (geocode, poi, search, maps)."""
    sel = settings.providers
    choice = {
        "geocode": sel.geocode,
        "poi": sel.poi,
        "search": sel.search,
        "static_map": sel.static_map,
        "satellite_map": sel.satellite_map,
    }[family]
    if choice == "offline":
        if family in {"geocode", "poi"}:
            from geosleuth.tools.providers.offline_geo import OfflineGeoProvider

            return OfflineGeoProvider(settings.poi_files)
        if family == "search":
            from geosleuth.tools.providers.search_offline import OfflineSearchProvider

            return OfflineSearchProvider(settings.resolved_data_dir(), settings.search_documents)
        from geosleuth.tools.providers.maps_offline import OfflineMapProvider

        return OfflineMapProvider(settings.maps.width, settings.maps.height)
    if choice == "nominatim":
        from geosleuth.tools.providers.nominatim import NominatimProvider

        return NominatimProvider(settings)
    if choice == "photon":
        from geosleuth.tools.providers.photon import PhotonProvider

        return PhotonProvider(settings)
    if choice == "google":
        from geosleuth.tools.providers.google import GoogleProvider

        return GoogleProvider(settings, family)
    if choice == "opencage":
        from geosleuth.tools.providers.opencage import OpenCageProvider

        return OpenCageProvider(settings)
    if choice == "amap":
        from geosleuth.tools.providers.amap import AMapProvider

        return AMapProvider(settings, family)
    if choice in {"osm", "esri"}:
        from geosleuth.tools.providers.tiles import TileMapProvider

        return TileMapProvider(settings, choice)
    if choice in {"tavily", "serper", "brave", "searxng"}:
        import importlib

        module = importlib.import_module(f"geosleuth.tools.providers.{choice}")
        cls = {"tavily": "TavilyProvider", "serper": "SerperProvider", "brave": "BraveProvider"}.get(
            choice, "SearxngProvider"
        )
        return getattr(module, cls)(settings)
    raise ToolError(f"unknown provider {choice!r} for {family}")


@dataclass
class ToolRuntime:
    """Settings, cache and lazily created providers shared by all tools of one registry."""

    settings: ToolSettings
    cache: ToolCache
    providers: dict[str, Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def provider(self, family: str) -> Any:
        with self._lock:
            if family not in self.providers:
                try:
                    self.providers[family] = make_provider(family, self.settings)
                except ValueError as exc:
                    raise ToolError(str(exc)) from None
            return self.providers[family]

    async def run(
        self,
        tool: str,
        family: str,
        arguments: dict[str, Any],
        call: Callable[[Any], Awaitable[ToolResult]],
    ) -> ToolResult:
        """Call through the cache (offline providers skip it unless configured otherwise)."""
        provider = self.provider(family)

        async def invoke() -> ToolResult:
            result = await call(provider)
            result.provider = provider.name
            return result

        try:
            if provider.name == "offline" and not self.settings.cache.cache_offline:
                return await invoke()
            result = await self.cache.get_or_call(tool, provider.identity, arguments, invoke)
        except ToolError as exc:  # keep the provider on failures, for the trajectory's records
            return ToolResult.failure(str(exc), provider=provider.name)
        result.provider = provider.name
        return result

    def output(self, tool: str, text: str) -> str:
        return wrap_output(tool, truncate(text, self.settings.max_result_chars))
