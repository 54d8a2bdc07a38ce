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
ObserverOpt = Annotated[
    str | None,
    typer.Option(
        "--observer",
        help="For a text-only --model: 'offline' (the offline clue pipeline describes the image: OCR "
        "text with positions, EXIF, languages, phone numbers, domains, candidate places) or a vision "
        "model (name or URL) that describes it; image tools then answer in text.",
    ),
]
ObserverUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--observer-base-url", help="OpenAI-compatible base URL of the observer (default --base-url)."
    ),
]
ProviderOpt = Annotated[
    str,
    typer.Option(
        "--provider",
        help="Request dialect: auto (from the base URL) | generic | openai | gemini | deepseek.",
    ),
]
ReasoningEffortOpt = Annotated[
    str | None,
    typer.Option("--reasoning-effort", help="reasoning_effort for reasoning models (sent where accepted)."),
]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="Completion token limit per model turn.")
]
