"""Choice lists for option help, read from the registries so the help cannot go stale.

Kept light (no import of the agent package): ``geosleuth locate --help`` should not pay for
httpx and pydantic models. ``tests/cli/test_cli_vocabulary.py`` checks each list against the
registry it mirrors (prompt files, ``AgentConfig`` literals, the scoring protocols, dataset
formats and judge tasks).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from geosleuth.extras import install_line

NOT_STYLES = frozenset({"common", "verifier", "observer"})  # prompt files that are not styles
PROVIDERS = ("auto", "generic", "openai", "gemini", "deepseek")  # AgentConfig.provider
TOOL_CALLING = ("native", "text")  # AgentConfig.tool_calling
PROTOCOLS = (
    "twm",
    "osv5m",
    "spotagent",
    "geovista",
    "wherebench",
    "geoclip",
    "g3",
    "pigeon",
    "geoestimation",
    "default",
)
"""scoring.protocols.PROTOCOLS (importing it for `score --help` would load NumPy)."""
DATASET_FORMATS = (
    "generic", "im2gps3k", "yfcc4k", "osv5m", "mp16pro", "greval", "geobench", "mapbench",
    "wherecountry", "wherestreet", "hf",
)  # fmt: skip
"""eval.adapters.FORMATS."""
JUDGE_TASKS = ("levels", "path", "clues", "shapley")  # eval.config.JUDGE_TASKS


def prompt_styles() -> list[str]:
    """The style names shipped in ``geosleuth/agent/prompts`` (as ``available_styles`` lists them)."""
    spec = importlib.util.find_spec("geosleuth.agent")
    if spec is None or not spec.submodule_search_locations:
        return []
    folder = Path(next(iter(spec.submodule_search_locations))) / "prompts"
    names = (p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml"))
    return sorted(n for n in names if n not in NOT_STYLES)


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
    """The install line for a missing optional package (`geosleuth.extras.install_line`), else None."""
    top = (exc.name or "").split(".")[0]
    extra = EXTRAS.get(top)
    if extra is None:
        return None
    return f"this needs the optional package {top!r} (not installed): {install_line(extra)}"
