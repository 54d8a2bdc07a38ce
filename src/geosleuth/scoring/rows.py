"""What a file reader hands the scorer: numbered rows, or the error that stops the file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class ScoreInputError(Exception):
    """A problem that stops scoring a file (the message names the file)."""


@dataclass(slots=True)
class InputRow:
    """One record of an input file, with its 1-based line (or item) number."""

    line: int
    data: dict[str, Any] | None
    error: str | None = None
