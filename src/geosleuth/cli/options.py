"""Option types shared by commands that talk to a model (`locate`, `serve`), so they read alike."""

from __future__ import annotations

from typing import Annotated

import typer

ModelOpt = Annotated[
    str | None,
    typer.Option(
        "--model", "-m", help="Model name or server URL; without it the offline clue pipeline runs."
    ),
]
BaseUrlOpt = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible base URL (default $OPENAI_BASE_URL).")
]
