"""``geosleuth.locate`` / ``alocate``: one photo through the agent, or the offline clue pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from geosleuth.agent.config import AgentConfig
from geosleuth.agent.prompting import load_style
from geosleuth.agent.runner import run_task
from geosleuth.core.records import Task, Trajectory

CLI_FIELDS: Mapping[str, str] = {
    "prompt": "prompt_style",
    "verifier": "verifier_model",
    "geocode": "geocode_answers",
}
"""`geosleuth locate` options whose AgentConfig field has another name."""
CLI_DEFAULTS: Mapping[str, Any] = {"geocode_answers": True}
"""Where `geosleuth locate` defaults differ from AgentConfig's, the CLI's win."""


def agent_config(model: str | None = None, **options: Any) -> AgentConfig:
    """An AgentConfig from `geosleuth locate`'s options (``prompt``, ``verifier``, ``no_ocr``, …).

    AgentConfig's own field names are accepted too. ``tools`` may be a comma-separated string.
    Settings that cannot run (an observer or several samples without a model) raise ValueError
    here, before any image is read.
    """
    fields: dict[str, Any] = dict(CLI_DEFAULTS)
    for name, value in options.items():
        if name == "no_ocr":
            fields["offline_use_ocr"] = not value
        elif name == "tools" and isinstance(value, str):
            fields["tools"] = [t.strip() for t in value.split(",") if t.strip()]
        elif name == "timeout":
            fields.update(_timeouts(value))
        else:
            fields[CLI_FIELDS.get(name, name)] = value
    unknown = sorted(set(fields) - set(AgentConfig.model_fields))
    if unknown:
        raise TypeError(f"unknown option(s) {', '.join(unknown)}; see `geosleuth locate --help`")
    config = AgentConfig(model=model, **{k: v for k, v in fields.items() if v is not None})
    if model is not None:
        load_style(config.prompt_style)
    elif config.observer is not None:
        raise ValueError("--observer describes the image to a text-only --model: give --model too")
    elif config.samples > 1:
        raise ValueError("--samples and --verifier need --model (the offline pipeline is deterministic)")
    elif options.get("timeout") is not None:
        raise ValueError("--timeout bounds the model's turns: give --model too")
    return config


def _timeouts(timeout: float | None) -> dict[str, float]:
    """``timeout`` bounds each image's run and, when shorter than the default, each request."""
    if timeout is None:
        return {}
    request = AgentConfig.model_fields["request_timeout_s"].default
    return {"timeout_s": timeout, "request_timeout_s": min(timeout, request)}


async def alocate(
    image: str | Path, model: str | None = None, *, out: str | Path | None = None, **options: Any
) -> Trajectory:
    """`locate` for async code (a notebook's running loop, a web handler)."""
    config = agent_config(model, **options)
    path = Path(image)
    artifacts = Path(out) if out is not None else None
    if artifacts is not None:
        artifacts.mkdir(parents=True, exist_ok=True)
    return await run_task(Task(id=path.stem or "image", image=str(path)), config, artifacts_dir=artifacts)


def locate(
    image: str | Path, model: str | None = None, *, out: str | Path | None = None, **options: Any
) -> Trajectory:
    """Locate one photo: with a ``model`` the agent asks it, without one the offline pipeline runs.

    ``options`` are `geosleuth locate`'s, by the same names (``base_url``, ``prompt``,
    ``samples``, ``verifier``, ``max_turns``, ``no_ocr``, …). ``out`` is where tool images are
    written. A bad image or a failing model is the trajectory's ``status``, not an exception.
    """
    return asyncio.run(alocate(image, model, out=out, **options))
