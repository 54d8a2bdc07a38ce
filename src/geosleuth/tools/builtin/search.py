"""The web search tool: up to 10 hits, each clipped to its share of the result budget."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field

from geosleuth.tools.base import ToolResult, tool
from geosleuth.tools.builtin.results import query_text
from geosleuth.tools.leakguard import active_guard
from geosleuth.tools.providers.base import SearchHit
from geosleuth.tools.runtime import ToolRuntime
from geosleuth.tools.text import truncate


@tool
async def web_search(
    runtime: ToolRuntime, query: str, max_results: Annotated[int, Field(ge=1, le=10)] = 5
) -> ToolResult:
    """Search the web; returns up to 10 results with title, url and snippet.

    Args:
        query: Search query, e.g. a shop name with a phone number, or text read from a sign.
        max_results: Number of results, 1 to 10.
    """
    query = query_text(query, "query")
    n = min(max_results, runtime.settings.max_results)

    async def call(p: Any) -> ToolResult:
        hits: list[SearchHit] = (await p.search(query, max_results=n))[:n]
        per_hit = max(200, runtime.settings.max_result_chars // max(len(hits), 1))
        hits = [
            SearchHit(title=truncate(h.title, 200), url=h.url, snippet=truncate(h.snippet, per_hit))
            for h in hits
        ]
        return ToolResult(
            text=runtime.output("web_search", _text(query, hits)), data=[h.model_dump() for h in hits]
        )

    result = await runtime.run("web_search", "search", {"query": query, "max_results": n}, call)
    return _screened(runtime, query, result)


def _text(query: str, hits: list[SearchHit]) -> str:
    if not hits:
        return f"No results for {query!r}."
    return "\n\n".join(f"[{i + 1}] {h.title}\n{h.url}\n{h.snippet}" for i, h in enumerate(hits))


def _screened(runtime: ToolRuntime, query: str, result: ToolResult) -> ToolResult:
    """The result without the hits the running sample's leak guard drops (after the cache, so a
    cached search is screened for each sample that asks it); dropped hits leave no trace."""
    guard = active_guard()
    if guard is None or not result.ok or not isinstance(result.data, list):
        return result
    hits = [SearchHit.model_validate(d) for d in result.data]
    kept = guard.keep(hits, lambda h: (h.url, f"{h.title}\n{h.snippet}"))
    if len(kept) == len(hits):
        return result
    text = runtime.output("web_search", _text(query, kept))
    return replace(result, text=text, data=[h.model_dump() for h in kept])
