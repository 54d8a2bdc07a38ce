"""geosleuth: agentic image geolocation."""

from __future__ import annotations

from functools import cache


@cache
def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geosleuth")
    except PackageNotFoundError:  # running from a source tree without installation
        return "0.0.0"


def __getattr__(name: str) -> str:
    """``__version__`` is looked up on first use: importlib.metadata costs ~50 ms at start-up."""
    if name == "__version__":
        return _version()
    raise AttributeError(f"module 'geosleuth' has no attribute {name!r}")
