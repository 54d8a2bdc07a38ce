"""The linear-time guards' clock: it counts the call's own work, not time the machine spent elsewhere."""

from __future__ import annotations

import gc
import re
import time

from geosleuth.testing import cpu_seconds


def test_a_sleeping_call_costs_no_cpu_and_its_result_comes_back() -> None:
    out, seconds = cpu_seconds(lambda s: (time.sleep(s), "done")[1], 0.3)
    assert out == "done" and seconds < 0.1  # 0.3 s of wall clock, next to none of CPU


def test_keyword_arguments_reach_the_call() -> None:
    out, _ = cpu_seconds(sorted, [3, 1, 2], reverse=True)
    assert out == [3, 2, 1]


def test_backtracking_work_is_counted() -> None:
    match, seconds = cpu_seconds(re.fullmatch, r"(a|aa)+c", "a" * 26)  # Fibonacci(26) paths, all failing
    assert match is None and seconds > 0.002


def test_the_collector_is_paused_only_for_the_call() -> None:
    seen: list[bool] = []
    cpu_seconds(lambda: seen.append(gc.isenabled()))
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        cpu_seconds(lambda: None)
        assert not gc.isenabled()  # a caller's own choice is left as it was
    finally:
        gc.enable()


def test_hypothesis_examples_have_no_wall_clock_deadline() -> None:
    from hypothesis import settings

    assert settings.default.deadline is None  # tests/conftest.py's profile, for every property test
