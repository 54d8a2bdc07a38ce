"""geosleuth: agentic image geolocation.

The flat API, for notebooks and scripts (docs/python-api.md)::

    import geosleuth

    trajectory = geosleuth.locate("photo.jpg")                      # offline; model="…" asks a VLM
    result = geosleuth.score("preds.jsonl", protocol="twm")        # result.metrics["acc@25km"]
    samples = geosleuth.load_dataset("data/im2gps3k")
    run = geosleuth.evaluate("data/im2gps3k", model="…", out="runs/a")  # resumable
    step = geosleuth.reward("step")                                 # step(text, truth) -> float

Every name is imported on first use (PEP 562), so ``import geosleuth`` loads nothing else.
"""

__version__ = "0.1.0"
"""The one place the version lives (pyproject reads it: ``[tool.hatch.version]``); a literal,
because looking it up through ``importlib.metadata`` costs every CLI start (bench/startup_bench.py)."""

EXPORTS: dict[str, str] = {
    "locate": "geosleuth.api.locate",
    "alocate": "geosleuth.api.locate",
    "agent_config": "geosleuth.api.locate",
    "score": "geosleuth.api.scoring",
    "Score": "geosleuth.api.scoring",
    "load_dataset": "geosleuth.api.datasets",
    "evaluate": "geosleuth.api.evaluate",
    "Evaluation": "geosleuth.api.evaluate",
    "reward": "geosleuth.api.reward",
    "Reward": "geosleuth.api.reward",
    "Task": "geosleuth.core.records",
    "Sample": "geosleuth.core.records",
    "Trajectory": "geosleuth.core.records",
    "Prediction": "geosleuth.core.records",
    "AgentConfig": "geosleuth.agent.config",
    "ToolRegistry": "geosleuth.tools.base",
    "Tool": "geosleuth.tools.base",
    "ToolContext": "geosleuth.tools.base",
    "ToolResult": "geosleuth.tools.base",
    "tool": "geosleuth.tools.base",
    "build_registry": "geosleuth.tools.registry",
}
"""Public name -> the module that defines it (tests/test_layering.py checks the facade stays lazy)."""

__all__ = ["__version__", *EXPORTS]


def __getattr__(name: str) -> object:
    from importlib import import_module  # here, not above: `import geosleuth` imports nothing

    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'geosleuth' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *EXPORTS})
