"""Helpers shared by the agent tests (plain functions; fixtures live in conftest.py)."""

from __future__ import annotations

import base64
import io
import struct
import zlib
from pathlib import Path
from typing import Any

from PIL import Image

from geosleuth.agent import AgentConfig


def make_config(base_url: str, **overrides: Any) -> AgentConfig:
    values: dict[str, Any] = {
        "model": "fake-vlm",
        "base_url": base_url,
        "prompt_style": "geovista",
        "max_retries": 2,
        "retry_backoff_s": 0.01,
        "request_timeout_s": 5.0,
        "timeout_s": 30.0,
    }
    values.update(overrides)
    return AgentConfig(**values)


def decode_data_url(url: str) -> Image.Image:
    assert url.startswith("data:image/")
    return Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))


def image_parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [p for p in content if p.get("type") == "image_url"] if isinstance(content, list) else []


def text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if p.get("type") == "text")
    return content or ""


def bomb_png(path: Path, width: int = 50_000, height: int = 50_000) -> Path:
    """A tiny file whose header claims width × height pixels (a decompression bomb)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )
    return path
