"""A PNG seen without its oversized ancillary chunks, so that no decoder ever reads them.

Pillow reads every chunk it meets whole into memory: an eXIf, text, ICC or private chunk of
400 MB in a 64x64 PNG cost 1.2 GB while the image was opened (the chunk, its copy in
``info["exif"]``, its parse). Ancillary chunks are optional by the PNG specification, so those
larger than `MAX_ANCILLARY_CHUNK`, and any beyond `MAX_ANCILLARY_TOTAL` together, are left out:
the chunk lengths are walked first (8 bytes read per chunk), and the decoder is handed a view
of the stream that skips them, reading the rest from the source as it goes.
"""

from __future__ import annotations

import io
import logging
import struct
from typing import BinaryIO

log = logging.getLogger(__name__)

SIGNATURE = b"\x89PNG\r\n\x1a\n"
MAX_ANCILLARY_CHUNK = 1 << 20
"""Largest ancillary chunk kept: EXIF, ICC profiles and text are kilobytes (JPEG caps EXIF at 64 KB)."""
MAX_ANCILLARY_TOTAL = 8 << 20
"""All the ancillary chunks kept, together (Pillow keeps private chunks' data)."""
_FRAME_DATA = frozenset({b"fdAT"})
"""Ancillary by its name's case, but an animated PNG's frames: never left out."""
CRITICAL_SIZES = {b"IHDR": 13, b"PLTE": 768, b"IEND": 0}
"""The most bytes each bounded critical chunk may have (PNG 1.2: IHDR is 13 bytes, a palette at
most 256 entries of 3); IDAT is the image data, read by the decoder as it streams."""


class BadCriticalChunk(ValueError):
    """A critical chunk larger than the PNG specification allows, or an unknown critical chunk
    past `MAX_ANCILLARY_CHUNK`: the image cannot be decoded without it, so it is refused (a
    decoder would read it whole: 400 MB of PLTE cost 1.3 GB, issue 41)."""


def _check_critical(kind: bytes, length: int) -> None:
    bound = CRITICAL_SIZES.get(kind)
    if bound is not None and length > bound:
        raise BadCriticalChunk(
            f"PNG chunk {kind.decode('latin-1')!r} of {length:,} bytes, where at most {bound:,} are valid"
        )
    if bound is None and kind != b"IDAT" and length > MAX_ANCILLARY_CHUNK:
        raise BadCriticalChunk(
            f"unknown critical PNG chunk {kind.decode('latin-1')!r} of {length:,} bytes "
            f"(more than {MAX_ANCILLARY_CHUNK:,})"
        )


def dropped_chunks(fp: BinaryIO) -> list[tuple[int, int, bytes]]:
    """(offset, bytes including header and CRC, type) of each ancillary chunk to leave out; the
    stream's position is kept. A stream that is not a PNG, or ends early, yields what was found;
    an oversized critical chunk raises `BadCriticalChunk`."""
    start = fp.tell()
    dropped: list[tuple[int, int, bytes]] = []
    try:
        if fp.read(8) != SIGNATURE:
            return []
        kept = 0
        while True:
            offset = fp.tell()
            head = fp.read(8)
            if len(head) < 8:
                return dropped
            length, kind = struct.unpack(">I4s", head)
            if kind == b"IEND":
                return dropped
            if not kind[0] & 0x20:  # upper-case first letter: critical
                _check_critical(kind, length)
            elif kind not in _FRAME_DATA:  # lower-case first letter: ancillary
                if length > MAX_ANCILLARY_CHUNK or kept + length > MAX_ANCILLARY_TOTAL:
                    dropped.append((offset, length + 12, kind))
                else:
                    kept += length
            fp.seek(length + 4, io.SEEK_CUR)
    finally:
        fp.seek(start)


class _Spliced(io.RawIOBase):
    """The bytes of ``fp`` from its current position with the ``holes`` (offset, length) left out."""

    def __init__(self, fp: BinaryIO, holes: list[tuple[int, int]]) -> None:
        super().__init__()
        self._fp = fp
        base = fp.tell()
        fp.seek(0, io.SEEK_END)
        end = fp.tell()
        self._pieces: list[tuple[int, int, int]] = []  # (virtual start, source start, length)
        virtual, source = 0, base
        for offset, length in sorted(holes):
            if offset > source:
                self._pieces.append((virtual, source, offset - source))
                virtual += offset - source
            source = max(source, offset + length)
        if end > source:
            self._pieces.append((virtual, source, end - source))
            virtual += end - source
        self._size = virtual
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        origin = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, origin + offset)
        return self._pos

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        done = 0
        for virtual, source, length in self._pieces:
            if done == len(view) or virtual >= self._pos + len(view) - done:
                break
            if virtual + length <= self._pos:
                continue
            skip = self._pos - virtual
            take = min(length - skip, len(view) - done)
            self._fp.seek(source + skip)
            got = self._fp.readinto(view[done : done + take])  # type: ignore[attr-defined]
            done += got or 0
            self._pos += got or 0
            if got != take:
                break
        return done

    def close(self) -> None:
        self._fp.close()
        super().close()


def without_big_ancillary(fp: BinaryIO, label: str) -> BinaryIO:
    """``fp`` itself, or a view of it without the ancillary chunks to leave out (logged)."""
    if not getattr(fp, "seekable", lambda: False)():
        return fp
    dropped = dropped_chunks(fp)
    if not dropped:
        return fp
    names = ", ".join(f"{kind.decode('latin-1')!r} ({size - 12:,} bytes)" for _, size, kind in dropped[:5])
    log.info("%s: left out %d oversized ancillary PNG chunk(s): %s", label, len(dropped), names)
    return io.BufferedReader(_Spliced(fp, [(offset, size) for offset, size, _ in dropped]))
