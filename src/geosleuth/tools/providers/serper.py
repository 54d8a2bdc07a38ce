"""Serper (Google results): POST /search with the X-API-KEY header; ``organic`` results."""

from __future__ import annotations

from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError, require_key
from geosleuth.tools.providers.base import SearchHit, client_for, search_hits

API_URL = "https://google.serper.dev"


class SerperProvider:
    name = "serper"

    def __init__(self, settings: ToolSettings) -> None:
        self.key = require_key(settings.api_key("serper"), "serper", "search")
        self.base_url = (settings.base_url("serper", API_URL) or API_URL).rstrip("/")
        self.client = client_for(settings, "serper", key=self.key)

    @property
    def identity(self) -> str:
        return f"serper@{self.base_url}"

    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        data = await self.client.post_json(
            f"{self.base_url}/search", {"q": query, "num": max_results}, {"X-API-KEY": self.key}
        )
        if not isinstance(data, dict) or not isinstance(data.get("organic", []), list):
            raise ProviderError("serper returned an unexpected response")
        return search_hits(data.get("organic"), max_results, url_key="link", snippet_key="snippet")
