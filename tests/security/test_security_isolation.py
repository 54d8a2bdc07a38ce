"""No sample starves another (issue 14, item 2) and records stay small (item 6, arguments)."""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

from geosleuth.agent import AgentConfig, run_task
from geosleuth.agent.toolcalls import decode_arguments, parse_text_calls
from geosleuth.agent.workers import ParseTimeout, bounded
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import MAX_ARGUMENT_CHARS, Task, ToolCallRecord, Trajectory, TrajectoryStatus
from geosleuth.testing import FakeOpenAIServer, cpu_seconds, reply, tool_call

BACKTRACKING = (r"(a|aa)+c", "a" * 40)
"""re.fullmatch on these holds the GIL for minutes (exponential backtracking inside C): a
stand-in for any slow parser, whatever the parsing module does."""


async def _ticks(seconds: float) -> float:
    """The longest the event loop went without running this task (it wants to run every 10 ms)."""
    worst, last = 0.0, time.perf_counter()
    end = last + seconds
    while last < end:
        await asyncio.sleep(0.01)
        now = time.perf_counter()
        worst, last = max(worst, now - last), now
    return worst


RUNAWAY_S = 4.0
"""The runaway's budget: long enough that a stalled CI runner cannot blur the two outcomes."""


async def test_a_gil_holding_parse_neither_blocks_the_loop_nor_other_parses() -> None:
    await bounded(30.0, parse_answer, "warm-up", "robust")  # start the pool outside the measurement
    slow = asyncio.create_task(bounded(RUNAWAY_S, re.fullmatch, *BACKTRACKING))
    gap = asyncio.create_task(_ticks(1.0))
    await asyncio.sleep(0.1)
    healthy = await bounded(30.0, parse_answer, '{"lat": 48.8566, "lon": 2.3522}', "robust")
    assert (healthy.lat, healthy.lon) == (48.8566, 2.3522)
    assert not slow.done()  # served by the other worker while the runaway ran, not queued behind it
    assert await gap < RUNAWAY_S / 2  # the event loop kept running (a thread would have frozen it)
    with pytest.raises(ParseTimeout):
        await slow
    # the pool that ran away was replaced: parsing goes on
    again = await bounded(30.0, parse_answer, "Answer: 35.6762, 139.6503", "robust")
    assert again.has_coords


def _image(tmp_path: Path, name: str) -> str:
    path = tmp_path / f"{name}.jpg"
    Image.new("RGB", (64, 48), (10, 90, 160)).save(path)
    return str(path)


async def test_parse_timeout_is_this_samples_parse_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A parse past the deadline ends only its own trajectory, as a parse failure that says why."""
    import geosleuth.agent.loop as loop

    async def never_parses(timeout_s: float, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise ParseTimeout(f"parsing took longer than {timeout_s:g} s and was abandoned")

    monkeypatch.setattr(loop, "bounded", never_parses)
    with FakeOpenAIServer(default=reply("Lat 48.85, Lon 2.35")) as server:
        config = AgentConfig(model="m", base_url=server.base_url, prompt_style="direct", parse_timeout_s=0.5)
        trajectory = await run_task(Task(id="a", image=_image(tmp_path, "a")), config)
    assert trajectory.status is TrajectoryStatus.PARSE_FAILED
    assert "abandoned" in (trajectory.error or "")


async def test_healthy_samples_finish_beside_a_pathological_one(tmp_path: Path) -> None:
    """Eight samples in flight; one answers with the issue's whitespace repro."""
    adversarial = " \n" * 60 + "done"
    served = itertools.count()

    def script(request: dict) -> object:  # the first request to arrive gets the pathological answer
        bad = next(served) == 0
        return reply(
            adversarial if bad else '{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}'
        )

    with FakeOpenAIServer(script) as server:
        config = AgentConfig(
            model="m", base_url=server.base_url, prompt_style="direct", timeout_s=20.0, parse_timeout_s=2.0
        )
        tasks = [Task(id=f"sample-{i}", image=_image(tmp_path, f"s{i}")) for i in range(8)]
        trajectories = await asyncio.gather(*(run_task(t, config) for t in tasks))
    statuses = [t.status.value for t in trajectories]
    assert "timeout" not in statuses and statuses.count("ok") >= 7  # the odd one may recover after a reminder


def test_a_huge_argument_is_stored_once_and_capped() -> None:
    """The issue's repro: a 5 MB argument made a 10 MB record."""
    huge = {"query": "x" * 5_000_000}
    record = ToolCallRecord(name="web_search", arguments=huge)
    stored = json.dumps(record.arguments)
    assert len(stored) < MAX_ARGUMENT_CHARS + 100
    assert record.arguments["_original_chars"] == len(json.dumps(huge))
    assert record.arguments["_truncated"].startswith('{"query": "xxx')
    assert ToolCallRecord.model_validate_json(record.model_dump_json()).arguments == record.arguments
    small = ToolCallRecord(name="geocode", arguments={"address": "Zürich"})
    assert small.arguments == {"address": "Zürich"}


def test_arguments_too_long_or_too_deep_are_errors_not_crashes() -> None:
    args, err = decode_arguments("{" + '"a": ' * 10 + '"' + "x" * 100_000 + '"' + "}" * 10)
    assert args is None and "too long" in (err or "")
    args, err = decode_arguments("[" * 50_000 + "]" * 50_000)
    assert args is None and err


async def test_the_loop_records_a_huge_native_argument_capped(tmp_path: Path) -> None:
    huge = json.dumps({"query": "y" * 2_000_000})
    script = [reply(tool_calls=[tool_call("web_search", huge, "c1")]), reply('{"lat": 1.0, "lon": 2.0}')]
    with FakeOpenAIServer(script) as server:
        config = AgentConfig(
            model="m", base_url=server.base_url, tools=["web_search"], tool_calling="native",
            tool_settings={"cache": {"backend": "none"}},
        )  # fmt: skip
        trajectory: Trajectory = await run_task(Task(id="a", image=_image(tmp_path, "a")), config)
    assert len(trajectory.model_dump_json()) < 100_000  # not 2 × 2 MB
    call = trajectory.turns[0].tool_calls[0]
    assert not call.ok and "too long" in (call.error or "")


@pytest.mark.parametrize(
    "text",
    [
        "<tool_call>a" + " " * 200_000 + "b</tool_call>",  # took 26 s at 20,000 spaces
        "<tool_call>" + " \n" * 100_000 + "x",
        "<tool_call>```json" + " " * 100_000 + "{}" + " " * 100_000 + "```",
        "geocode(" * 20_000,
    ],
)
def test_text_tool_calls_are_read_in_linear_time(text: str) -> None:
    _, seconds = cpu_seconds(parse_text_calls, text, ["geocode"])
    assert seconds < 2.0


CALL_PIECES = st.sampled_from(
    ["<tool_call>", "</tool_call>", " ", "\n", "```", "json", "{", "}", '"name"', ":", '"geocode"', ",",
     '"arguments"', "geocode(", ")", "address=", "'x'", "\t"]
)  # fmt: skip


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(CALL_PIECES, max_size=400).map("".join))
def test_fuzz_text_tool_calls_never_crash_and_stay_fast(text: str) -> None:
    calls, seconds = cpu_seconds(parse_text_calls, text, ["geocode"])
    assert seconds < 1.0
    assert all(c.error or isinstance(c.arguments, dict) for c in calls)
