"""The ``geosleuth`` command: one typer app, one module per command group.

``main`` imports only the module of the command being run (``geosleuth score …`` never loads
the agent, eval or training CLIs); ``--help`` and ``app`` (for tests and embedding) load all.
"""

from __future__ import annotations

import sys
from functools import cache
from importlib import import_module
from typing import Any

import typer

MODULES: tuple[str, ...] = ("locate", "score", "eval", "tools", "serve", "gazetteer", "data")
COMMANDS: dict[str, str] = {
    "locate": "locate",
    "score": "score",
    "eval": "eval",
    "report": "eval",
    "compare": "eval",
    "merge": "eval",
    "datasets": "eval",
    "tools": "tools",
    "tool": "tools",
    "mcp": "tools",
    "serve": "serve",
    "gazetteer": "gazetteer",
    "data": "data",
}
"""Top-level command -> the module that registers it."""


def build(modules: tuple[str, ...] = MODULES) -> typer.Typer:
    """An app with the commands of ``modules`` registered."""
    app = typer.Typer(
        name="geosleuth",
        help="Agentic image geolocation: locate, score, evaluate, train.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    if len(modules) == 1:

        @app.callback()
        def _group() -> None:
            """Agentic image geolocation: locate, score, evaluate, train."""

    for name in modules:
        import_module(f"geosleuth.cli.{name}").register(app)
    return app


@cache
def _full_app() -> typer.Typer:
    return build()


def __getattr__(name: str) -> Any:
    """``app`` (every command) is built on first access."""
    if name == "app":
        return _full_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    first = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    module = COMMANDS.get(first or "")
    build((module,) if module else MODULES)()
