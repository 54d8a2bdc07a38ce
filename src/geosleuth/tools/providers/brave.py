"""Brave Search API: GET /res/v1/web/search with X-Subscription-Token; ``web.results``."""

from __future__ import annotations

from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, require_key
from geosleuth.tools.providers.base import SearchHit, client_for, search_hits

API_URL = "https://api.search.brave.com"


class BraveProvider:
    name = "brave"

    def __init__(self, settings: ToolSettings) -> None:
        self.key = require_key(settings.api_key("brave"), "brave", "search")
        self.base_url = (settings.base_url("brave", API_URL) or API_URL).rstrip("/")
        self.client = client_for(settings, "brave", key=self.key)

    @property
    def identity(self) -> str:
        return f"brave@{self.base_url}"

    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        headers = {"X-Subscription-Token": self.key, "Accept": "application/json"}
        data = await self.client.get_json(
            f"{self.base_url}/res/v1/web/search", {"q": query, "count": max_results}, headers
        )
        if not isinstance(data, dict):
            raise ProviderError("brave returned an unexpected response")
        web = data.get("web")
        results = web.get("results") if isinstance(web, dict) else None
        return search_hits(results, max_results, snippet_key="description")
