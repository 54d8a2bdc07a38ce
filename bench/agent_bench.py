"""Agent loop overhead and concurrency against a local OpenAI-compatible server that answers at once.

Two measurements:
  1. ``overhead``: sequential trajectories of ``--turns`` turns (tool call each turn, then the
     answer). Loop overhead per turn = trajectory wall time − model round trips (client-measured
     HTTP latency) − tool time, divided by the turns; reported for a small and a 2 M-pixel image
     (the image is re-serialised into every request, so its size shows up in the round trip).
  2. ``concurrency``: ``--trajectories`` trajectories at once through `run_tasks` with one shared
     client; reports errors, trajectories/s and model turns/s.

Usage: python bench/agent_bench.py [--turns 4] [--repeats 50] [--trajectories 256]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from PIL import Image

from geosleuth.agent import AgentConfig, run_task, run_tasks
from geosleuth.agent.runner import make_client
from geosleuth.core.records import Task, Trajectory, TrajectoryStatus
from geosleuth.testing import FakeOpenAIServer, Step, reply
from geosleuth.tools.base import ToolRegistry, tool

ANSWER = "<answer>\nCountry: Switzerland\nCity: Luzern\nLatitude: 47.0502\nLongitude: 8.3093\n</answer>"


@tool
def lookup(query: str) -> str:
    """An instant tool.

    Args:
        query: anything.
    """
    return f"nothing known about {query}"


def scripted(turns: int) -> Any:
    """Tool calls until the conversation has ``turns - 1`` assistant messages, then the answer."""

    def step(request: dict[str, Any]) -> Step:
        done = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
        if done < turns - 1:
            return reply(f'<tool_call>{{"name": "lookup", "arguments": {{"query": "q{done}"}}}}</tool_call>')
        return reply(ANSWER)

    return step


def make_image(folder: Path, size: tuple[int, int], name: str) -> Path:
    img = Image.effect_noise(size, 60).convert("RGB")
    path = folder / name
    img.save(path, quality=90)
    return path


def overhead_ms(t: Trajectory) -> float:
    wall = (t.finished_at or 0) - (t.started_at or 0)
    model = sum(turn.latency_s for turn in t.turns)
    tools = sum(max((c.latency_s for c in turn.tool_calls), default=0.0) for turn in t.turns)
    return 1000 * (wall - model - tools) / max(1, len(t.turns))


async def bench_overhead(base_url: str, image: Path, turns: int, repeats: int) -> dict[str, float]:
    config = AgentConfig(model="fake-vlm", base_url=base_url, prompt_style="geovista", max_turns=turns + 1)
    registry = ToolRegistry([lookup])
    client = make_client(config)
    overheads, rtts = [], []
    try:
        for i in range(repeats + 3):
            t = await run_task(Task(id=f"o{i}", image=str(image)), config, client=client, registry=registry)
            assert t.status is TrajectoryStatus.OK and len(t.turns) == turns, (t.status, t.error)
            if i >= 3:  # warm-up: connection, OCR-free imports, caches
                overheads.append(overhead_ms(t))
                rtts.extend(1000 * turn.latency_s for turn in t.turns)
    finally:
        await client.aclose()
    return {
        "overhead_ms_median": statistics.median(overheads),
        "overhead_ms_p95": sorted(overheads)[int(0.95 * (len(overheads) - 1))],
        "round_trip_ms_median": statistics.median(rtts),
    }


async def bench_concurrency(base_url: str, image: Path, n: int, turns: int) -> dict[str, float]:
    config = AgentConfig(
        model="fake-vlm",
        base_url=base_url,
        prompt_style="geovista",
        max_turns=turns + 1,
        request_timeout_s=120,
    )
    tasks = [Task(id=f"c{i}", image=str(image)) for i in range(n)]
    start = time.perf_counter()
    out = await run_tasks(tasks, config, concurrency=n, registry=ToolRegistry([lookup]))
    wall = time.perf_counter() - start
    errors = [t for t in out if t.status is not TrajectoryStatus.OK]
    total_turns = sum(len(t.turns) for t in out)
    return {
        "trajectories": n,
        "errors": len(errors),
        "wall_s": wall,
        "trajectories_per_s": n / wall,
        "turns_per_s": total_turns / wall,
        "tool_calls": sum(len(t.tool_calls) for t in out),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--trajectories", type=int, default=256)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAIServer(scripted(args.turns)) as server:
        small = make_image(Path(tmp), (640, 480), "small.jpg")
        large = make_image(Path(tmp), (1732, 1154), "large.jpg")  # just under the 2 M pixel budget
        for label, image in (("640x480", small), ("1732x1154 (2 M px)", large)):
            r = await bench_overhead(server.base_url, image, args.turns, args.repeats)
            print(
                f"overhead  image {label:>20}: loop overhead/turn median {r['overhead_ms_median']:.2f} ms, "
                f"p95 {r['overhead_ms_p95']:.2f} ms; "
                f"local HTTP round trip median {r['round_trip_ms_median']:.2f} ms"
            )
        c = await bench_concurrency(server.base_url, small, args.trajectories, args.turns)
        print(
            f"concurrency {c['trajectories']} trajectories x {args.turns} turns: errors {c['errors']}, "
            f"wall {c['wall_s']:.2f} s, {c['trajectories_per_s']:.1f} trajectories/s, "
            f"{c['turns_per_s']:.1f} model turns/s, {c['tool_calls']} tool calls"
        )


if __name__ == "__main__":
    asyncio.run(main())
