"""Tavily search API: POST /search with a Bearer key; results carry title, url, content."""

from __future__ import annotations

from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, require_key
from geosleuth.tools.providers.base import SearchHit, client_for, search_hits

API_URL = "https://api.tavily.com"


class TavilyProvider:
    name = "tavily"

    def __init__(self, settings: ToolSettings) -> None:
        self.key = require_key(settings.api_key("tavily"), "tavily", "search")
        self.base_url = (settings.base_url("tavily", API_URL) or API_URL).rstrip("/")
        self.client = client_for(settings, "tavily", key=self.key)

    @property
    def identity(self) -> str:
        return f"tavily@{self.base_url}"

    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        body = {"query": query, "max_results": max_results, "search_depth": "basic"}
        data = await self.client.post_json(
            f"{self.base_url}/search", body, {"Authorization": f"Bearer {self.key}"}
        )
        if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
            raise ProviderError("tavily returned an unexpected response")
        return search_hits(data.get("results"), max_results)
