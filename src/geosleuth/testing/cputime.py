"""CPU time of one call, for tests that guard against super-linear parsing.

A linear-time guard asks how much work a call did, not how long the machine took: wall-clock
time on a shared CI runner also counts other processes and cyclic-GC passes over everything the
test session has loaded (a 1.4 s stall around a 31-character redaction once failed CI). This
thread's CPU time, with the collector paused for the call, counts only the call's own work.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def cpu_seconds(fn: Callable[..., T], *args: object, **kwargs: object) -> tuple[T, float]:
    """``fn(*args, **kwargs)`` and the CPU seconds this thread spent in it, the collector paused."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.thread_time()
        out = fn(*args, **kwargs)
        return out, time.thread_time() - start
    finally:
        if was_enabled:
            gc.enable()
