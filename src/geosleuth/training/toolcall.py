"""What every training engine's tool path shares: which tools a policy may be offered, and a
tool call that always ends (in time) with something the policy can read.

A policy trained with a tool that reads the photo's own GPS tag learns to read the answer,
so ``exif_gps`` is never offered unless the user opts in. A call that runs past its time
limit becomes an error message; the rollout goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from geosleuth.tools.base import ToolContext, ToolRegistry, ToolResult
from geosleuth.training.leaks import ANSWER_READING as ANSWER_READING
from geosleuth.training.leaks import EXIF_HELP as EXIF_HELP

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 60.0


def training_tools(
    available: Iterable[str],
    requested: Sequence[str] | None = None,
    allow_exif: bool = False,
    aliases: Iterable[str] = (),
) -> list[str]:
    """The tools to offer: ``requested`` (checked against ``available`` and the ``aliases`` a
    paper's style names them by) or every available one; answer-reading tools only with
    ``allow_exif``."""
    available = list(available)
    if requested is None:
        return [n for n in available if allow_exif or n not in ANSWER_READING]
    names = list(requested)
    unknown = [n for n in names if n not in available and n not in set(aliases)]
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; available: {sorted(available)}")
    leaking = sorted(ANSWER_READING.intersection(names))
    if leaking and not allow_exif:
        raise ValueError(
            f"{', '.join(leaking)} can read the answer (the photo's GPS tag) and is not offered in "
            "training unless you opt in (allow_exif=True, --allow-exif)"
        )
    if leaking:
        log.warning("training offers %s: on photos that keep their EXIF it reads the answer", leaking)
    return names


async def run_tool(
    registry: ToolRegistry,
    name: str,
    arguments: dict | None,
    ctx: ToolContext,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
) -> ToolResult:
    """``registry.call`` bounded in time: past ``timeout_s`` the policy reads an error.

    A synchronous tool's thread cannot be stopped; it finishes in the background and its
    result is discarded.
    """
    try:
        return await asyncio.wait_for(registry.call(name, arguments, ctx), timeout_s)
    except TimeoutError:
        log.warning("tool %s timed out after %g s", name, timeout_s)
        return ToolResult.failure(f"{name} timed out after {timeout_s:g} s; try another query or tool")
