"""Write a file inside a folder without ever following a link (issue 41).

A dataset folder is a stranger's: a planted ``<name>.part`` symlink, or a symlinked directory on
the way to an extracted member, must not turn an extraction into a write elsewhere. Every
component below ``root`` is opened with ``O_NOFOLLOW`` relative to its parent's descriptor
(created when missing), the bytes go into a fresh ``O_EXCL`` temp file there, and a rename
puts them in place (a link already at the final name is replaced, never followed).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class ConfinedPathError(OSError):
    """The relative name leaves its root, or a component on its way is a link or not a folder."""


def _parts(relative: str) -> list[str]:
    parts = [p for p in PurePosixPath(relative.replace("\\", "/")).parts if p not in ("", ".")]
    if not parts or relative.startswith(("/", "\\")) or any(p == ".." for p in parts):
        raise ConfinedPathError(f"{relative!r} is not a name inside its folder")
    return parts


def _open_dir(name: str, parent: int) -> int:
    """The directory ``name`` under ``parent``, created if missing, refused if it is a link."""
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, 0o755, dir_fd=parent)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent)
    except OSError as exc:  # ELOOP: a symlink; ENOTDIR: a file in the way
        raise ConfinedPathError(f"{name!r} is a link or not a folder: refused to write through it") from exc


def write_confined(root: Path, relative: str, data: bytes) -> Path:
    """Write ``data`` at ``root/relative`` through real folders only; return the final path.

    ``root`` itself is the folder the user named (it may be reached through a link they made);
    nothing under it is followed.
    """
    parts = _parts(relative)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for name in parts[:-1]:
            child = _open_dir(name, fd)
            os.close(fd)
            fd = child
        temp = f".{parts[-1]}.{secrets.token_hex(8)}.tmp"
        out = os.open(temp, _FILE_FLAGS, 0o644, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as handle:
                handle.write(data)
            os.rename(temp, parts[-1], src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=fd)
            raise
    finally:
        os.close(fd)
    return root.joinpath(*parts)
