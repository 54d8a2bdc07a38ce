"""One `eval` process at a time per run directory (issue 41).

Two processes appending to one ``trajectories.jsonl`` would run every sample twice and
interleave their records. The run holds an exclusive ``flock`` on ``.eval.lock`` in its
directory while it runs; a second process is refused at once, naming the holder. The kernel
drops the lock when the holder dies, so a ``kill -9`` never leaves the directory locked.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from geosleuth.eval.run.store import RunDirError

LOCK_FILE = ".eval.lock"


@contextlib.contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock, or raise `RunDirError` when another process holds it."""
    path = run_dir / LOCK_FILE
    fd = os.open(
        path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0), 0o644
    )
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            raise RunDirError(
                f"{run_dir} is being written by another geosleuth eval (pid {holder}); wait for it, "
                "or use another --out"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
