"""What an image file says besides its pixels, and the same image without it.

A benchmark photo's EXIF GPS, caption, XMP or IPTC block, PNG text chunk or JPEG comment can
hold its answer. Benchmark runs and training exports hand over pixels only: `strip_metadata`
for a decoded image, `stripped_file_bytes` for a file copied as is (JPEG and PNG lose only
their metadata segments, so pixels stay bit-identical), `metadata_kinds` to count what was
withheld, read from headers only. `file_sha256` is the identity of an image file.
"""

from __future__ import annotations

import base64
import hashlib
import io
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from PIL import Image

from geosleuth.bounds.imageio import ImageInputError, open_header

KEEP_INFO = frozenset({"transparency", "icc_profile", "gamma", "decode_scale", "original_size", "work_scale"})
"""Decoded-image info kept by `strip_metadata`: how pixels are drawn, and geosleuth's own sizes."""

GPS_IFD = 0x8825
EXIF_IFD = 0x8769
CAPTION_TAGS = (0x010E, 0x9C9B, 0x9C9C, 0x9C9D, 0x9C9E, 0x9C9F)
"""ImageDescription and Windows' XPTitle, XPComment, XPAuthor, XPKeywords, XPSubject."""
USER_COMMENT = 0x9286
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_KEEP = frozenset(
    {b"IHDR", b"PLTE", b"IDAT", b"IEND", b"tRNS", b"gAMA", b"cHRM", b"sRGB", b"iCCP", b"sBIT", b"pHYs",
     b"bKGD", b"acTL", b"fcTL", b"fdAT"}
)  # fmt: skip
"""PNG chunks that draw the pixels (critical, colour, animation); text, eXIf and tIME go."""
_PNG_TEXT = frozenset({b"tEXt", b"zTXt", b"iTXt"})
_MAX_EXIF_CHUNK = 1 << 20
_JPEG_KEEP_APP = ((0xE0, b"JFIF\x00"), (0xE2, b"ICC_PROFILE\x00"), (0xEE, b"Adobe"))
"""JPEG application segments kept (JFIF header, ICC profile, Adobe colour transform); every
other APPn (EXIF, XMP, IPTC, MPF, maker data) and every comment is removed."""
_STANDALONE = frozenset({0x01, *range(0xD0, 0xD8)})  # TEM and restart markers carry no length


def file_sha256(path: str | Path) -> str:
    """Hex SHA-256 of a file's bytes, streamed."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def strip_metadata(img: Image.Image) -> Image.Image:
    """The same pixels with no file metadata (EXIF, XMP, IPTC, text, comments) attached."""
    clean = img.copy()
    clean.info = {k: v for k, v in img.info.items() if k in KEEP_INFO}
    return clean


def metadata_kinds(source: str | Path) -> list[str]:
    """Which answer-bearing metadata a file carries, from its headers only, sorted: ``gps``,
    ``caption`` (EXIF description or comment), ``xmp``, ``iptc``, ``text`` (PNG text chunks),
    ``comment`` (JPEG). Camera make and model alone name no place and are not listed.
    `ImageInputError` when the file is not a readable image."""
    path = Path(source)
    try:
        with path.open("rb") as handle:
            if handle.read(8) == _PNG_SIGNATURE:
                return sorted(_png_kinds(handle))
    except OSError as exc:
        raise ImageInputError(f"{path}: {exc.strerror or exc}") from None
    kinds: set[str] = set()
    with open_header(path, label=str(path)) as im:
        exif = im.info.get("exif")
        if isinstance(exif, bytes):
            kinds |= _exif_kinds(exif)
        elif im.format == "TIFF":
            kinds |= _exif_kinds(im.getexif().tobytes())
        if im.info.get("xmp") or any(n == "APP1" and b"ns.adobe.com/xap" in d[:64] for n, d in _apps(im)):
            kinds.add("xmp")
        if any(n == "APP13" for n, _ in _apps(im)) or getattr(im, "tag_v2", {}).get(33723):
            kinds.add("iptc")
        if im.info.get("comment"):
            kinds.add("comment")
    return sorted(kinds)


def _apps(im: Image.Image) -> list[tuple[str, bytes]]:
    return list(getattr(im, "applist", []))


def _exif_kinds(data: bytes) -> set[str]:
    """``gps`` for a GPS position, ``caption`` for descriptive text, in an EXIF block."""
    exif = Image.Exif()
    try:
        exif.load(data)
        gps, sub = exif.get_ifd(GPS_IFD), exif.get_ifd(EXIF_IFD)
    except (ValueError, SyntaxError, struct.error, OSError):
        return set()
    kinds = {"gps"} if gps.get(2) is not None and gps.get(4) is not None else set()
    texts = [exif.get(tag) for tag in CAPTION_TAGS] + [sub.get(USER_COMMENT)]
    if any(_has_text(t) for t in texts):
        kinds.add("caption")
    return kinds


def _has_text(value: object) -> bool:
    if isinstance(value, bytes):
        value = value.removeprefix(b"ASCII\x00\x00\x00").removeprefix(b"UNICODE\x00").replace(b"\x00", b"")
        return bool(value.strip())
    return bool(str(value).strip("\x00 ")) if value is not None else False


def _png_kinds(handle: BinaryIO) -> set[str]:
    kinds: set[str] = set()
    for kind, length in _png_chunks(handle):
        if kind in _PNG_TEXT:
            keyword = handle.read(min(length, 80)).split(b"\x00", 1)[0]
            kinds.add("xmp" if keyword == b"XML:com.adobe.xmp" else "text")
            handle.seek(length - min(length, 80) + 4, io.SEEK_CUR)
        elif kind == b"eXIf" and length <= _MAX_EXIF_CHUNK:
            kinds |= _exif_kinds(handle.read(length))
            handle.seek(4, io.SEEK_CUR)
        else:
            handle.seek(length + 4, io.SEEK_CUR)
    return kinds


def _png_chunks(handle: BinaryIO) -> Iterator[tuple[bytes, int]]:
    """(type, length) of each chunk, the stream left at its data (the caller moves past it)."""
    while True:
        head = handle.read(8)
        if len(head) < 8:
            return
        length, kind = struct.unpack(">I4s", head)
        if kind == b"IEND":
            return
        yield kind, length


def pixels_only_data_url(source: str | Path) -> str:
    """A data URL of an image without its file's metadata, from a path or a ``data:`` URL (for a
    harness that sends image files as they are)."""
    text = str(source)
    raw = base64.b64decode(text.split(",", 1)[1]) if text.startswith("data:") else Path(text).read_bytes()
    data = stripped_file_bytes(raw)
    with open_header(data, label="image") as im:
        mime = Image.MIME.get(str(im.format), "image/png")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def stripped_file_bytes(data: bytes) -> bytes:
    """An image file's bytes without its metadata: JPEG and PNG segment by segment (pixels
    untouched), other formats decoded and written again in their format without metadata.
    `ImageInputError` when the bytes are no image."""
    if data.startswith(_PNG_SIGNATURE):
        return _strip_png(data)
    if data.startswith(b"\xff\xd8"):
        return _strip_jpeg(data)
    with open_header(data, label="image") as im:
        fmt = im.format
        im.load()
        clean = strip_metadata(im)
    out = io.BytesIO()
    clean.save(out, format=fmt, **({"lossless": True} if fmt == "WEBP" else {}))
    return out.getvalue()


def _strip_png(data: bytes) -> bytes:
    out = bytearray(_PNG_SIGNATURE)
    at = 8
    while at + 8 <= len(data):
        length, kind = struct.unpack(">I4s", data[at : at + 8])
        end = at + 12 + length
        if kind in _PNG_KEEP or kind == b"IEND":
            out += data[at:end]
        if kind == b"IEND":
            break
        at = end
    return bytes(out)


def _strip_jpeg(data: bytes) -> bytes:
    out = bytearray(b"\xff\xd8")
    at = 2
    while at + 1 < len(data):
        if data[at] != 0xFF:
            raise ImageInputError("image: a JPEG segment does not start with a marker")
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
            continue
        if marker == 0xD9:
            return bytes(out + b"\xff\xd9")  # anything after the end (an appended preview) goes too
        if marker in _STANDALONE:
            out += data[at : at + 2]
            at += 2
            continue
        end = at + 2 + int.from_bytes(data[at + 2 : at + 4], "big")
        segment = data[at:end]
        if not (0xE0 <= marker <= 0xEF or marker == 0xFE) or any(
            marker == m and segment[4:].startswith(tag) for m, tag in _JPEG_KEEP_APP
        ):
            out += segment
        at = end
        if marker == 0xDA:  # entropy-coded data runs to the next marker that is not a restart
            scan = at
            while (scan := data.find(b"\xff", scan)) != -1 and scan + 1 < len(data):
                if data[scan + 1] != 0 and data[scan + 1] not in _STANDALONE:
                    break
                scan += 2
            stop = len(data) if scan == -1 or scan + 1 >= len(data) else scan
            out += data[at:stop]
            at = stop
    return bytes(out)
