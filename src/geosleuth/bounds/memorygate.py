"""How many images may be in flight at once, by memory rather than by a fixed count.

A 62 MP PNG is 182 KB on disk and about 250 MB once decoded; eight of them at once need
gigabytes. Each image task (a `locate` sample, an MCP tool call) reserves an estimate from its
image header (`image_bytes`) out of a budget of half the memory available when the gate is made;
a task waits while the others hold the budget, and one task larger than the whole budget still
runs, alone.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

BYTES_PER_PIXEL = 4  # the decoded frame (RGB or RGBA) a task holds or passes through
TASK_OVERHEAD = 64 * 2**20  # resized copies, encoded images
BUDGET_SHARE = 0.5
FALLBACK_AVAILABLE = 4 * 2**30


def image_bytes(width: int, height: int, work: int = 0) -> int:
    """The bytes a task on a ``width`` x ``height`` image needs at its peak: the decoded frame, the
    fixed overhead and ``work``, what its processing allocates besides (e.g. OCR's peak)."""
    return width * height * BYTES_PER_PIXEL + TASK_OVERHEAD + work


def available_memory() -> int:
    """Bytes the system can give without swapping (``MemAvailable``), or a conservative guess."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return FALLBACK_AVAILABLE


class MemoryGate:
    """A weighted semaphore over bytes: ``async with gate.hold(n)`` waits until ``n`` fits."""

    def __init__(self, budget: int) -> None:
        self.budget = max(1, budget)
        self.used = 0
        self.holders = 0
        self._changed = asyncio.Condition()

    def hold(self, amount: int) -> _Hold:
        return _Hold(self, amount)

    async def _acquire(self, amount: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.holders == 0 or self.used + amount <= self.budget)
            self.used += amount
            self.holders += 1

    async def _release(self, amount: int) -> None:
        async with self._changed:
            self.used -= amount
            self.holders -= 1
            self._changed.notify_all()


class _Hold:
    def __init__(self, gate: MemoryGate, amount: int) -> None:
        self.gate, self.amount = gate, amount

    async def __aenter__(self) -> None:
        await self.gate._acquire(self.amount)

    async def __aexit__(self, *exc: object) -> None:
        await self.gate._release(self.amount)


def memory_gate() -> MemoryGate:
    """A gate over `BUDGET_SHARE` of the memory available now."""
    return MemoryGate(int(available_memory() * BUDGET_SHARE))
