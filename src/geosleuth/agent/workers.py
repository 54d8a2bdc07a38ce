"""Parsing model output in worker processes, with a deadline, so no sample can starve another.

Parsing runs inside a regular-expression engine that holds the GIL: a thread does not help,
a 25 s parse in one trajectory would freeze the event loop and every trajectory on it. Here
each parse goes to one of a few worker processes (each runs one parse at a time, fed through
its own pipe) and must answer within the deadline, counted from when that worker received it.
A worker that overruns is killed and replaced; the others keep serving, so one runaway costs
its own sample a `ParseTimeout` and nothing else.

Where processes cannot be started (Windows, a sandbox) parsing falls back to a thread: the
deadline still holds for the trajectory, but the event loop is not shielded.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Connection
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

DEFAULT_PARSE_TIMEOUT_S = 10.0
DEFAULT_WORKERS = 2
"""Processes (``GEOSLEUTH_PARSE_WORKERS``; 0 parses in threads). Two keep one runaway parse from
holding up the others while it is still inside its deadline."""
START_TIMEOUT_S = 120.0
"""How long a new worker may take to start and import the parsers (not counted in any deadline)."""


class ParseTimeout(TimeoutError):
    """A parse ran past its deadline (or its worker died) and was abandoned."""


def _warm_up() -> None:
    """Load what parsing loads lazily (country tables, patterns) before the worker says it is
    ready: a first parse that pays for it would otherwise run into its deadline."""
    from geosleuth.agent.toolcalls import parse_text_calls
    from geosleuth.core.parsing import parse_answer

    parse_answer('{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}', "robust")
    parse_answer("Country: Deutschland\nCity: Berlin\nLatitude: 52.52 N\nLongitude: 13.40 E", "robust")
    parse_text_calls('<tool_call>{"name": "geocode", "arguments": {"address": "x"}}</tool_call>', ["geocode"])


def _serve(inbox: Connection, outbox: Connection) -> None:
    """Worker main loop: load the parsers, say so, then answer one call at a time."""
    _warm_up()
    outbox.send(("ready", os.getpid()))
    while True:
        try:
            fn, args, kwargs = inbox.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", fn(*args, **kwargs))
        except Exception as exc:  # noqa: BLE001 - sent back and raised in the caller
            reply = ("error", exc)
        try:
            outbox.send(reply)
        except (TypeError, AttributeError, ValueError) as exc:  # an unpicklable result or error
            outbox.send(("error", RuntimeError(f"{type(exc).__name__}: {exc}")))


def worker_main(inbox_fd: int, outbox_fd: int) -> None:
    """Entry point of a worker process (``python -c``: no user module is re-imported)."""
    try:
        _serve(Connection(inbox_fd, writable=False), Connection(outbox_fd, readable=False))
    except (BrokenPipeError, ConnectionResetError, EOFError, KeyboardInterrupt):
        return  # the parent went away: nothing to answer


class _Worker:
    """One interpreter started with ``python -c`` and the two pipes to it.

    Not `multiprocessing.Process`: its spawn and forkserver methods re-run the caller's main
    module in the child (a script without a ``__main__`` guard would run itself again), and
    fork copies a process full of threads and locks.
    """

    def __init__(self) -> None:
        to_child, child_in = os.pipe()
        child_out, from_child = os.pipe()
        code = f"from geosleuth.agent.workers import worker_main; worker_main({to_child}, {from_child})"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-c", code],
                pass_fds=(to_child, from_child),
                env=env,
                stdin=subprocess.DEVNULL,
            )
        finally:
            os.close(to_child)
            os.close(from_child)
        self.inbox = Connection(child_in, readable=False)
        self.outbox = Connection(child_out, writable=False)
        self.ready = False

    def call(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float
    ) -> Any:
        if not self.ready:
            try:
                if not self.outbox.poll(START_TIMEOUT_S):
                    raise ParseTimeout(f"the parse worker did not start within {START_TIMEOUT_S:g} s")
                self.outbox.recv()
            except (EOFError, OSError):
                raise ParseTimeout("the parse worker died while starting") from None
            self.ready = True
        try:
            self.inbox.send((fn, args, kwargs))
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise ParseTimeout("the parse worker died") from None
        if not self.outbox.poll(timeout_s):
            raise ParseTimeout(f"parsing took longer than {timeout_s:g} s and was abandoned")
        try:
            status, value = self.outbox.recv()
        except (EOFError, OSError):
            raise ParseTimeout("the parse worker died") from None
        if status == "error":
            raise value
        return value

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(5)
        self.inbox.close()
        self.outbox.close()


class ParsePool:
    """Worker processes, each serving one call at a time; a runaway worker is replaced alone."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._lock = threading.Lock()
        self._idle: queue.SimpleQueue[_Worker] | None = None
        self._threads: ThreadPoolExecutor | None = None

    def start(self) -> None:
        """Start the processes now (they load the parsers while the model is being asked)."""
        self._start()

    def _start(self) -> None:
        """Start the processes (once); on failure fall back to threads for good."""
        with self._lock:
            if self._threads is not None:
                return
            if self.workers > 0 and os.name != "posix":
                self.workers = 0  # pipes handed to a child by descriptor: POSIX only
            if self.workers > 0:
                try:
                    idle: queue.SimpleQueue[_Worker] = queue.SimpleQueue()
                    for _ in range(self.workers):
                        idle.put(_Worker())
                    self._idle = idle
                except (OSError, ValueError) as exc:  # a sandbox without fork/exec
                    log.warning("parsing in threads: cannot start worker processes (%s)", exc)
                    self.workers = 0
            self._threads = ThreadPoolExecutor(self.workers or 4, thread_name_prefix="geosleuth-parse")

    def _call(
        self, fn: Callable[..., T], args: tuple[Any, ...], kwargs: dict[str, Any], timeout_s: float
    ) -> T:
        """In a pool thread: borrow a worker, run, and replace the worker if it ran away or died."""
        assert self._idle is not None
        worker = self._idle.get()
        try:
            return worker.call(fn, args, kwargs, timeout_s)
        except ParseTimeout:
            worker.stop()
            try:
                worker = _Worker()
            except OSError as exc:  # the next call on the dead one fails fast and tries again
                log.warning("cannot restart a parse worker: %s", exc)
            raise
        finally:
            self._idle.put(worker)

    async def run(self, timeout_s: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in a worker; `ParseTimeout` past ``timeout_s`` of its own run time."""
        self._start()
        assert self._threads is not None
        loop = asyncio.get_running_loop()
        if self.workers == 0:
            future = loop.run_in_executor(self._threads, lambda: fn(*args, **kwargs))
            try:
                return await asyncio.wait_for(future, timeout_s)
            except TimeoutError:
                raise ParseTimeout(f"parsing took longer than {timeout_s:g} s and was abandoned") from None
        return await loop.run_in_executor(self._threads, self._call, fn, args, kwargs, timeout_s)

    def close(self) -> None:
        """Stop every worker (the pool starts afresh on its next use)."""
        with self._lock:
            idle, self._idle = self._idle, None
            threads, self._threads = self._threads, None
        if threads is not None:
            threads.shutdown(wait=True)
        while idle is not None and not idle.empty():
            idle.get().stop()


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
            atexit.register(_POOL.close)
        return _POOL


def use_parse_pool(pool: ParsePool) -> ParsePool:
    """Replace the process-wide pool (benchmarks compare processes with threads); returns the old one."""
    global _POOL
    with _POOL_LOCK:
        old, _POOL = _POOL, pool
    return old if old is not None else pool


async def bounded(timeout_s: float, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a parser off the event loop with a deadline (see the module docstring)."""
    return await parse_pool().run(timeout_s, fn, *args, **kwargs)
