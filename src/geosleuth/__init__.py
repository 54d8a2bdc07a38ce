"""geosleuth: agentic image geolocation."""

__version__ = "0.1.0"
"""The one place the version lives (pyproject reads it: ``[tool.hatch.version]``); a literal,
because looking it up through ``importlib.metadata`` cost ~40 ms of every CLI start."""
