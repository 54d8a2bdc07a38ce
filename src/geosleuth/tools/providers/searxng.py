"""SearXNG metasearch (self-hosted): GET /search?format=json; needs a configured base URL."""

from __future__ import annotations

from geosleuth.tools.config import ToolSettings
from geosleuth.tools.http import ProviderError
from geosleuth.tools.providers.base import SearchHit, client_for, search_hits


class SearxngProvider:
    name = "searxng"

    def __init__(self, settings: ToolSettings) -> None:
        base = settings.base_url("searxng", None)
        if not base:
            raise ProviderError(
                "searxng needs the URL of an instance: set GEOSLEUTH_SEARXNG_BASE_URL or "
                "services.searxng.base_url, or configure providers.search to another provider"
            )
        self.base_url = base.rstrip("/")
        key = settings.api_key("searxng")
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}
        self.client = client_for(settings, "searxng", key=key)

    @property
    def identity(self) -> str:
        return f"searxng@{self.base_url}"

    async def search(self, query: str, max_results: int = 10) -> list[SearchHit]:
        data = await self.client.get_json(
            f"{self.base_url}/search", {"q": query, "format": "json"}, self.headers
        )
        if not isinstance(data, dict) or not isinstance(data.get("results", []), list):
            raise ProviderError("searxng returned an unexpected response (is format=json enabled?)")
        return search_hits(data.get("results"), max_results)
