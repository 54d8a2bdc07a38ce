"""Parsing model output in worker processes, with a time limit, so no sample can starve another.

Parsing runs inside a regular-expression engine that holds the GIL: a thread does not help,
a 25 s parse in one trajectory would freeze the event loop and every other trajectory on it.
Here each parse goes to a small pool of processes and is awaited with a deadline; a parse
that overruns is abandoned (`ParseTimeout`), the pool that ran it is replaced and its
processes are killed, and parses that were in flight on it are sent once more to the new pool.

Where processes cannot be started (a daemonic worker, a sandbox) parsing falls back to a
thread: the deadline still holds for the trajectory, but the event loop is no longer shielded.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_PARSE_TIMEOUT_S = 10.0
DEFAULT_WORKERS = 2
"""Processes in the pool (``GEOSLEUTH_PARSE_WORKERS``; 0 parses in a thread). Two keep one
runaway parse from blocking the rest while it is still inside its deadline."""


class ParseTimeout(TimeoutError):
    """A parse ran past its deadline and was abandoned."""


def _warm() -> int:
    """Imported in each new worker so the first real parse does not pay for the imports."""
    import geosleuth.agent.toolcalls  # noqa: F401
    import geosleuth.core.parsing  # noqa: F401

    return os.getpid()


class ParsePool:
    """A process pool that can be replaced when one of its tasks runs away."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._pool: Executor | None = None
        self._fallback: ThreadPoolExecutor | None = None
        self._ready: dict[int, Future[int]] = {}  # the current pool's warm-up

    def _current(self) -> Executor:
        with self._lock:
            if self._pool is None:
                self._pool = self._start()
            return self._pool

    def _start(self) -> Executor:
        if self.workers > 0:
            try:
                method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
                pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context(method))
                self._ready = {id(pool): pool.submit(_warm)}
                return pool
            except (OSError, AssertionError, NotImplementedError) as exc:  # daemonic process, sandbox
                log.warning("parsing in a thread: cannot start worker processes (%s)", exc)
        if self._fallback is None:
            self._fallback = ThreadPoolExecutor(4, thread_name_prefix="geosleuth-parse")
        return self._fallback

    def _retire(self, pool: Executor) -> None:
        """Stop using ``pool`` and kill its processes (the runaway parse among them)."""
        with self._lock:
            if self._pool is pool:
                self._pool = None
        if isinstance(pool, ProcessPoolExecutor):
            processes = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False)  # queued parses fail as BrokenProcessPool and are retried
            for process in processes:
                if process.is_alive():
                    process.kill()

    async def run(self, timeout_s: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker; `ParseTimeout` past ``timeout_s``.

        The deadline counts from submission once the pool has started (starting processes
        under load can take seconds and is no fault of the text being parsed).
        """
        loop = asyncio.get_running_loop()
        for attempt in range(2):
            pool = self._current()
            ready = self._ready.pop(id(pool), None)
            if ready is not None:
                try:
                    await asyncio.wrap_future(ready)
                except Exception as exc:  # noqa: BLE001 - processes start but cannot run: use a thread
                    log.warning("parsing in a thread: worker processes failed to start (%s)", exc)
                    self.workers = 0
                    self._retire(pool)
                    continue
            try:
                future = loop.run_in_executor(pool, _call, fn, args, kwargs)
            except RuntimeError:  # retired between taking and using it
                continue
            try:
                return await asyncio.wait_for(future, timeout_s)
            except TimeoutError:
                self._retire(pool)
                raise ParseTimeout(f"parsing took longer than {timeout_s:g} s and was abandoned") from None
            except BrokenProcessPool:  # another task's runaway parse took the pool down
                self._retire(pool)
                if attempt:
                    raise
        raise BrokenProcessPool("the parse pool kept failing")

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            self._retire(pool)


def _call(fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any]) -> T:
    return fn(*args, **kwargs)


_POOL: ParsePool | None = None
_POOL_LOCK = threading.Lock()


def parse_pool() -> ParsePool:
    """The process-wide pool (``GEOSLEUTH_PARSE_WORKERS`` processes, started on first use)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            try:
                workers = int(os.environ.get("GEOSLEUTH_PARSE_WORKERS", DEFAULT_WORKERS))
            except ValueError:
                workers = DEFAULT_WORKERS
            _POOL = ParsePool(max(0, workers))
        return _POOL


async def bounded(timeout_s: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a parser off the event loop with a deadline (see the module docstring)."""
    return await parse_pool().run(timeout_s, fn, *args, **kwargs)
