"""What `geosleuth serve` was started with; the browser sees only the harmless parts."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import geosleuth

MAX_UPLOAD_BYTES = 25 * 1024 * 1024
MAX_SAMPLES = 8
MAX_BATCH_FILES = 100
MAX_BATCH_BYTES = 512 * 1024 * 1024


def bundled_example() -> Path | None:
    """``examples/luzern_sign.png`` of a source checkout (None when installed without it)."""
    path = Path(geosleuth.__file__).resolve().parents[2] / "examples" / "luzern_sign.png"
    return path if path.is_file() else None


@dataclass
class ServeSettings:
    """Server configuration: the model endpoint, run folders, limits and where job files go."""

    model: str | None = None  # None: the offline clue pipeline
    base_url: str | None = None
    prompt_style: str = "geovista"
    runs: list[Path] = field(default_factory=list)
    workdir: Path | None = None  # job files; None: a temporary folder removed at shutdown
    example: Path | None = field(default_factory=bundled_example)
    max_upload_bytes: int = MAX_UPLOAD_BYTES
    max_samples: int = MAX_SAMPLES
    max_batch_files: int = MAX_BATCH_FILES  # images in one upload (a folder)
    max_batch_bytes: int = MAX_BATCH_BYTES  # all of one upload's files together
    concurrency: int = 2  # jobs running at once; more wait in a queue
    keep_jobs: int | None = (
        None  # finished jobs kept before the oldest are deleted; None: all (cases are kept)
    )
    tool_settings: Any = None
    agent_options: dict[str, Any] = field(default_factory=dict)  # extra AgentConfig fields

    def public(self) -> dict[str, Any]:
        """What the page may show: the model name and endpoint host, never keys or credentials."""
        return {
            "model": redact_url(self.model) if _is_url(self.model) else self.model,
            "endpoint": redact_url(self.base_url),
            "prompt_style": self.prompt_style,
            "max_upload_mb": round(self.max_upload_bytes / 1024 / 1024, 1),
            "max_samples": self.max_samples,
            "max_batch_files": self.max_batch_files,
            "example": self.example is not None,
            "runs": bool(self.runs),
        }


def redact_url(url: str | None) -> str | None:
    """Scheme, host, port and path only: no user:password, query string or fragment."""
    if not url:
        return None
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}{parts.path}" if parts.scheme else None


def _is_url(text: str | None) -> bool:
    return bool(text) and str(text).startswith(("http://", "https://"))
