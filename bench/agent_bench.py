"""Agent loop overhead and concurrency against a local OpenAI-compatible server that answers at once.

Two measurements:
  1. ``overhead``: sequential trajectories of ``--turns`` turns (tool call each turn, then the
     answer). Loop overhead per turn = trajectory wall time − model round trips (client-measured
     HTTP latency) − tool time, divided by the turns; reported for a small and a 2 M-pixel image
     (the image is re-serialised into every request, so its size shows up in the round trip).
  2. ``concurrency``: ``--trajectories`` trajectories at once through `run_tasks` with one shared
     client; reports errors, trajectories/s and model turns/s.
  3. ``real``: ``--real N`` trajectories against a real server (llama-cpp-python serving
     SmolLM2-135M on 127.0.0.1, text-only, so in observer mode on the bundled sign); reports
     tokens/s and turns/s, and the framework's share of wall time = (wall − time waiting on
     the server − tool and observer time) / wall, target < 2 %. Skipped with the reason when
     the server or model is not installed (scripts/test.sh installs both).

Usage: python bench/agent_bench.py [--turns 4] [--repeats 50] [--trajectories 256] [--real 8]
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
from geosleuth.agent.client import make_client
from geosleuth.core.records import Task, Trajectory, TrajectoryStatus
from geosleuth.testing import FakeOpenAIServer, LlamaCppServer, Step, llamacpp_unavailable, reply
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


EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "luzern_sign.png"


async def bench_real(base_url: str, n: int) -> dict[str, float]:
    """Sequential trajectories (the server decodes one request at a time) on the bundled sign."""
    # text tool calls and one tool schema: llama-cpp-python's grammar-bound native tool path
    # re-evaluates long prompts, which would measure that server, not the agent
    config = AgentConfig(model="smollm2-135m", base_url=base_url, prompt_style="thinking_with_map",
                         tools=["geocode"], tool_calling="text", observer="offline", max_turns=2,
                         max_tokens=32, temperature=0.0, geocode_answers=False)  # fmt: skip
    tasks = [Task(id=f"r{i}", image=str(EXAMPLE)) for i in range(n + 1)]
    await run_tasks(tasks[:1], config, concurrency=1)  # warm-up: OCR models, gazetteer, prompt cache
    start = time.perf_counter()
    out = await run_tasks(tasks[1:], config, concurrency=1)
    wall = time.perf_counter() - start
    model_turns = [turn for t in out for turn in t.turns if turn.note != "observation"]
    server = sum(turn.latency_s for turn in model_turns)
    tools = sum(max((c.latency_s for c in turn.tool_calls), default=0.0) for turn in model_turns)
    observer = sum(t.metadata.get("observer", {}).get("latency_s", 0.0) for t in out)
    completion = sum(turn.usage.completion_tokens for turn in model_turns)
    prompt = sum(turn.usage.prompt_tokens for turn in model_turns)
    return {
        "trajectories": n,
        "errors": sum(t.status in (TrajectoryStatus.MODEL_ERROR, TrajectoryStatus.TIMEOUT) for t in out),
        "wall_s": wall,
        "server_s": server,
        "tools_s": tools,
        "observer_s": observer,
        "turns": len(model_turns),
        "completion_tokens_per_s": completion / server if server else 0.0,
        "tokens_per_s": (prompt + completion) / wall,
        "turns_per_s": len(model_turns) / wall,
        "framework_share": (wall - server - tools - observer) / wall,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--trajectories", type=int, default=256)
    parser.add_argument("--real", type=int, default=8, help="trajectories against llama.cpp (0: skip)")
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
    if args.real <= 0:
        return
    reason = llamacpp_unavailable()
    if reason is not None:
        print(f"real      skipped: {reason}")
        return
    with LlamaCppServer() as real:
        r = await bench_real(real.base_url, args.real)
    print(
        f"real      llama.cpp SmolLM2-135M, {r['trajectories']} trajectories, {r['turns']} model turns, "
        f"errors {r['errors']}: {r['tokens_per_s']:.1f} tokens/s (prompt+completion over wall), "
        f"{r['completion_tokens_per_s']:.1f} completion tokens per second of server time, "
        f"{r['turns_per_s']:.2f} turns/s"
    )
    print(
        f"real      wall {r['wall_s']:.2f} s = server {r['server_s']:.2f} s + tools {r['tools_s']:.2f} s + "
        f"observer {r['observer_s']:.2f} s + framework {r['framework_share'] * r['wall_s']:.3f} s; "
        f"framework share {100 * r['framework_share']:.2f} % of wall (target < 2 %, ratio to target "
        f"{r['framework_share'] / 0.02:.2f})"
    )


if __name__ == "__main__":
    asyncio.run(main())
