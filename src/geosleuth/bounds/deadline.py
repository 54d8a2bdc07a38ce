"""When a sample's time limit starts: at its first model request, not when its task started.

Start-up (decoding the image, building tools, loading the gazetteer, starting parse workers)
can take long on a loaded host; charging it to ``--timeout`` timed samples out before the
model was ever asked. The evaluation runner puts a `SampleClock` in the task's context; an
agent that knows it will ask a model says so with `defer_clock` as it starts, and every model
request (`ChatClient.complete`) calls `start_clock`. A run function that never defers is
timed from its start, as before.
"""

from __future__ import annotations

import asyncio
import contextvars

STARTUP_TIMEOUT_S = 600.0
"""Longest start-up of a deferring run function before its first model request."""


class SampleClock:
    """One sample's clock: deferred (its agent will ask a model), then started (it asked)."""

    def __init__(self) -> None:
        self.deferred = False
        self.started_at: float | None = None  # event-loop time of the first model request
        self.started = asyncio.Event()

    def deadline(self, began: float, timeout_s: float) -> float:
        """Event-loop time at which the sample times out, given when its task ``began``."""
        if self.started_at is not None:
            return self.started_at + timeout_s
        if self.deferred:
            return began + max(timeout_s, STARTUP_TIMEOUT_S)
        return began + timeout_s


_CLOCK: contextvars.ContextVar[SampleClock | None] = contextvars.ContextVar("geosleuth_clock", default=None)


def current_clock() -> SampleClock | None:
    return _CLOCK.get()


def set_clock(clock: SampleClock | None) -> contextvars.Token[SampleClock | None]:
    return _CLOCK.set(clock)


def reset_clock(token: contextvars.Token[SampleClock | None]) -> None:
    _CLOCK.reset(token)


def defer_clock() -> None:
    """This task's time limit starts at its first model request (no-op outside a timed run)."""
    clock = _CLOCK.get()
    if clock is not None:
        clock.deferred = True


def start_clock() -> None:
    """A model request is going out: start this task's time limit if it has not started."""
    clock = _CLOCK.get()
    if clock is not None and clock.started_at is None:
        clock.started_at = asyncio.get_running_loop().time()
        clock.started.set()
