"""Option types shared by the commands, so one spelling means one thing everywhere.

The vocabulary: ``--json`` prints the result as JSON wherever a result is printed; ``-p`` is
``--prompt``; ``--format`` is a dataset's layout; ``--api-key-env`` names the variable holding
the model's key (``--judge-api-key-env`` / ``--verifier-api-key-env`` a judge's). Choice lists
in the help are generated from the registries (`geosleuth.cli.choices`).
"""

from __future__ import annotations

from typing import Annotated

import typer

from geosleuth.cli.choices import PROVIDERS, TOOL_CALLING, one_of, prompt_styles, tools

STYLE_HELP = (
    f"Prompt style: {one_of(prompt_styles())}, a style .yaml file of your own (docs/models.md), "
    "or package.module:STYLE."
)
PROVIDER_HELP = f"Request dialect: {one_of(PROVIDERS)} (auto: from the base URL)."
TOOL_CALLING_HELP = f"{one_of(TOOL_CALLING)} (default: the style's)."
RESIZE_HELP = (
    "Send images snapped to the server processor's patch multiple (28 Qwen2.5-VL, 32 Qwen3-VL), "
    "so absolute zoom boxes map exactly."
)
API_KEY_ENV_HELP = "Environment variable holding the API key (never the key itself); default OPENAI_API_KEY."
JSON_HELP = "Print the result as JSON."
TOOLS_HELP = f"Comma-separated tool names (default: the style's tools): {one_of(tools())}."

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
ProviderOpt = Annotated[str | None, typer.Option("--provider", help=PROVIDER_HELP)]
PromptOpt = Annotated[str | None, typer.Option("--prompt", "-p", help=STYLE_HELP)]
ApiKeyEnvOpt = Annotated[str | None, typer.Option("--api-key-env", help=API_KEY_ENV_HELP)]
AlwaysJsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print JSON: this command always does; --json is accepted as everywhere."),
]
ToolCallingOpt = Annotated[str | None, typer.Option("--tool-calling", help=TOOL_CALLING_HELP)]
TemperatureOpt = Annotated[float | None, typer.Option("--temperature", min=0, help="Sampling temperature.")]
ResizeFactorOpt = Annotated[int | None, typer.Option("--resize-factor", min=0, help=RESIZE_HELP)]
ReasoningEffortOpt = Annotated[
    str | None,
    typer.Option("--reasoning-effort", help="reasoning_effort for reasoning models (sent where accepted)."),
]
MaxTokensOpt = Annotated[
    int | None, typer.Option("--max-tokens", min=1, help="Completion token limit per model turn.")
]
ToolsOpt = Annotated[str | None, typer.Option("--tools", help=TOOLS_HELP)]
SamplesOpt = Annotated[
    int | None, typer.Option("--samples", "-n", min=1, help="Parallel trajectories per image (N).")
]
VerifierOpt = Annotated[
    str | None,
    typer.Option("--verifier", help="Verifier model for --samples > 1 (default: geodesic medoid)."),
]
VerifierViewOpt = Annotated[
    str | None,
    typer.Option(
        "--verifier-view",
        help="What the verifier reads of each sample: full (every turn's reasoning, tool calls, results "
        "and tool images, as Thinking with Map) | evidence (tool results and the final turn). "
        "Default: the prompt style's (full for thinking_with_map).",
    ),
]
MaxTurnsOpt = Annotated[int | None, typer.Option("--max-turns", min=1, help="Turn budget.")]
