"""Choice lists for option help, read from the registries so the help cannot go stale.

Each registry's light module (``*.catalog``) lists its names without importing what the entries
need: ``geosleuth locate --help`` pays for neither httpx nor pydantic models, and a protocol,
format, style, tool, reward or judge that a user's package registers shows up here too.
"""

from __future__ import annotations

from geosleuth.bounds.extras import install_line

PROVIDERS = ("auto", "generic", "openai", "gemini", "deepseek")  # AgentConfig.provider
TOOL_CALLING = ("native", "text")  # AgentConfig.tool_calling
GUARD_MODES = ("off", "hosts", "strict")  # tools.leakguard.GUARD_MODES


def protocols() -> list[str]:
    from geosleuth.scoring.catalog import PROTOCOLS

    return PROTOCOLS.names()


def dataset_formats() -> list[str]:
    from geosleuth.eval.datasets.catalog import format_names

    return format_names()


def prompt_styles() -> list[str]:
    from geosleuth.agent.catalog import PROMPT_STYLES

    return PROMPT_STYLES.names()


def tools() -> list[str]:
    from geosleuth.tools.catalog import TOOLS

    return TOOLS.names()


def rewards() -> list[str]:
    from geosleuth.training.rewards.catalog import REWARDS

    return REWARDS.names()


def judges() -> list[str]:
    from geosleuth.eval.judges.catalog import JUDGES

    return JUDGES.names()


def one_of(values: list[str] | tuple[str, ...]) -> str:
    return " | ".join(values)


EXTRAS = {
    "pyarrow": "hf",
    "datasets": "hf",
    "ray": "ray",
    "torch": "train",
    "trl": "train",
    "transformers": "train",
    "mcp": "mcp",
    "uvicorn": "web",
    "starlette": "web",
    "multipart": "web",
    "rapidocr": "ocr",
    "onnxruntime": "ocr",
    "redis": "redis",
    "playwright": "browser",
    "sentence_transformers": "similarity",
}
"""Optional packages by import name, and the ``pyproject.toml`` extra that installs each."""


def install_hint(exc: ImportError) -> str | None:
    """The install line for a missing optional package (`geosleuth.bounds.extras.install_line`), else None."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional package {top!r} (not installed): {install_line(extra)}"
