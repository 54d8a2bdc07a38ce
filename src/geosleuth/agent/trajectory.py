"""Trajectory files: images beside the JSONL, one record per line, OpenAI-chat export.

Inside a trajectory, images are referenced by path: the query image by its own path, images
made by tools by a path relative to the artifacts directory (the directory that holds the
JSONL). The request sent to the model swaps those paths for data URLs (`ImageStore.data_urls`).
"""

from __future__ import annotations

import base64
import json
import mimetypes
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from PIL import Image

from geosleuth.agent.images import encode_data_url, fit_to_budget, png_ready
from geosleuth.core.records import Trajectory, trajectory_from_json
from geosleuth.secrets import redact_text

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """A file-system-safe name for a sample id."""
    return _UNSAFE.sub("_", text).strip("._") or "sample"


class ImageStore:
    """Images of one trajectory: written under ``artifacts_dir`` when given, always kept as data URLs."""

    def __init__(self, artifacts_dir: Path | None, prefix: str, pixel_budget: int, fmt: str = "JPEG") -> None:
        self.artifacts_dir = artifacts_dir
        self.prefix = prefix
        self.pixel_budget = pixel_budget
        self.fmt = fmt
        self.data_urls: dict[str, str] = {}

    def add_encoded(self, ref: str, data_url: str) -> str:
        self.data_urls[ref] = data_url
        return ref

    def add(self, img: Image.Image, name: str) -> str:
        """Store a tool-made image; return the reference the trajectory keeps."""
        small, _ = fit_to_budget(img, self.pixel_budget)
        ref = f"images/{self.prefix}/{name}.png"
        if self.artifacts_dir is not None:
            path = self.artifacts_dir / ref
            path.parent.mkdir(parents=True, exist_ok=True)
            png_ready(small).save(path, format="PNG")
        else:
            ref = f"unsaved:{ref}"
        self.data_urls[ref] = encode_data_url(small, self.fmt)
        return ref


def write_trajectories(path: Path, trajectories: Iterable[Trajectory], append: bool = True) -> int:
    """Write one JSON line per trajectory; return how many were written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("a" if append else "w", encoding="utf-8") as fh:
        for t in trajectories:
            fh.write(redact_text(t.model_dump_json()) + "\n")
            n += 1
    return n


def scan_trajectories(path: Path) -> Iterator[tuple[int, Trajectory | ValueError]]:
    """Each non-blank line of a trajectory JSONL file: its number and the record, or why it is not one.

    Readers choose: `read_trajectories` stops at a bad line, batch tools record it and go on.
    """
    with path.open("rb") as fh:  # bytes: a line that is not UTF-8 is one bad record, not a failed file
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield i, trajectory_from_json(line)
            except ValueError as exc:
                yield i, ValueError(f"{path}:{i}: not a trajectory record ({exc})")


def read_trajectories(path: Path) -> Iterator[Trajectory]:
    """Read a trajectory JSONL file; a bad line raises with its line number."""
    for _, record in scan_trajectories(path):
        if isinstance(record, ValueError):
            raise record
        yield record


def _embed(url: str, base_dir: Path | None) -> str:
    if url.startswith(("data:", "http://", "https://")):
        return url
    if url.startswith("unsaved:"):
        raise ValueError(
            f"image {url[len('unsaved:') :]} was not saved: run with an artifacts directory (--out)"
        )
    p = Path(url)
    if not p.is_absolute() and base_dir is not None:
        p = base_dir / p
    mime = mimetypes.guess_type(p.name)[0] or "image/png"
    return f"data:{mime};base64,{base64.b64encode(p.read_bytes()).decode('ascii')}"


def to_openai_chat(
    trajectory: Trajectory, base_dir: Path | None = None, embed_images: bool = False
) -> dict[str, Any]:
    """The conversation as an OpenAI chat record (``messages`` + ``tools``) for SFT export.

    Images stay as paths unless ``embed_images`` is set, in which case files are read (relative
    paths against ``base_dir``, the directory of the JSONL) and inlined as data URLs.
    """
    messages = json.loads(json.dumps(trajectory.messages))
    if embed_images:
        for msg in messages:
            content = msg.get("content")
            if isinstance(content, list):
                for part in content:
                    if part.get("type") == "image_url":
                        part["image_url"]["url"] = _embed(part["image_url"]["url"], base_dir)
    record: dict[str, Any] = {"messages": messages}
    tools = trajectory.metadata.get("tool_schemas")
    if tools:
        record["tools"] = tools
    return record
