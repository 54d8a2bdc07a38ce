"""The one bounded reader of HTTP bodies: every outbound path (model client, judges, providers,
map tiles) reads a reply through `read_capped` (issues 32 and 41).

httpx reads whole bodies and inflates each network chunk whole, so 4 MB of gzip from a search
provider became 12 GB. Here a body is streamed raw and inflated at most up to the cap at a time;
the decoded size is counted as it comes out; an encoding the client did not ask for is refused by
name. The caller's total deadline (``asyncio.timeout`` around send + read) holds because every
step yields to the loop after at most a network chunk or ``cap`` bytes of inflation.
"""

from __future__ import annotations

import zlib
from typing import Any

import httpx

ACCEPT_ENCODING = "gzip, deflate"
"""The encodings `read_capped` decompresses itself; send it as ``Accept-Encoding`` (httpx would
otherwise advertise brotli and zstd, which are refused)."""
DEFAULT_MAX_BODY_BYTES = 16 * 2**20
"""Largest decoded body a provider reply may have; a longer one fails the call."""
_ZLIB_WBITS = {"gzip": 31, "x-gzip": 31, "deflate": 47}  # 47: zlib or gzip header, detected
_BODY_HEADERS = frozenset({"content-encoding", "content-length", "transfer-encoding"})


class BodyError(Exception):
    """A body this reader will not return; ``status`` is the reply's HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class BodyTooLarge(BodyError):
    """The decoded body passed the cap; reading stopped there."""


class BodyEncodingRefused(BodyError):
    """The server sent a Content-Encoding this reader does not decode."""


class BodyDamaged(BodyError):
    """A compressed body that does not inflate."""


async def read_capped(resp: httpx.Response, cap: int) -> bytes:
    """The decoded body of a streamed response, or `BodyTooLarge` as soon as it passes ``cap``."""
    status = resp.status_code
    declared = resp.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        seen = f"of {int(declared):,} bytes (Content-Length)"
        raise BodyTooLarge(
            f"HTTP {resp.status_code}: response body {seen} exceeds the {cap:,}-byte cap", status
        )
    if resp.is_stream_consumed:  # built in memory, already decoded
        if len(resp.content) > cap:
            seen = f"of {len(resp.content):,} bytes"
            raise BodyTooLarge(
                f"HTTP {resp.status_code}: response body {seen} exceeds the {cap:,}-byte cap", status
            )
        return resp.content
    encoding = resp.headers.get("content-encoding", "identity").strip().lower() or "identity"
    if encoding != "identity" and encoding not in _ZLIB_WBITS:
        raise BodyEncodingRefused(
            f"HTTP {resp.status_code}: the server sent Content-Encoding {encoding!r}; "
            f"this client asks for {ACCEPT_ENCODING} and reads nothing else",
            status,
        )
    inflater = zlib.decompressobj(_ZLIB_WBITS[encoding]) if encoding in _ZLIB_WBITS else None
    chunks: list[bytes] = []
    size = 0
    seen = f"of more than {cap:,} bytes{' (decompressed)' if inflater else ''}"
    over = f"HTTP {status}: response body {seen} exceeds the {cap:,}-byte cap; reading stopped there"
    async for raw in resp.aiter_raw():
        pending = raw
        while pending:
            if inflater is None:
                chunk, pending = pending, b""
            else:
                chunk, pending = _inflate(inflater, pending, cap - size + 1, status)
            size += len(chunk)
            if size > cap:
                raise BodyTooLarge(over, status)
            chunks.append(chunk)
    if inflater is not None:  # what the inflater holds back (at most its 32 KB window)
        chunks.append(inflater.flush())
        if size + len(chunks[-1]) > cap:
            raise BodyTooLarge(over, status)
    return b"".join(chunks)


def _inflate(inflater: Any, data: bytes, limit: int, status: int) -> tuple[bytes, bytes]:
    """At most ``limit`` (>= 1) bytes inflated from ``data``, and what of ``data`` is left."""
    try:
        out = inflater.decompress(data, limit)
    except zlib.error as exc:
        raise BodyDamaged(f"compressed body is damaged: {exc}", status) from None
    left = inflater.unconsumed_tail
    if inflater.eof or (not out and left == data):
        return out, b""  # the stream ended (trailing bytes are ignored, as httpx does)
    return out, left


async def send_capped(client: httpx.AsyncClient, request: httpx.Request, cap: int) -> httpx.Response:
    """Send ``request`` streamed and return the response with its body read through `read_capped`
    (the body headers dropped: the content is decoded)."""
    resp = await client.send(request, stream=True)
    try:
        content = await read_capped(resp, cap)
    finally:
        await resp.aclose()
    headers = [(k, v) for k, v in resp.headers.multi_items() if k.lower() not in _BODY_HEADERS]
    return httpx.Response(resp.status_code, headers=headers, content=content, request=request)
