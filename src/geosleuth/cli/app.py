"""The ``geosleuth`` command: one typer app, one module per command group."""

from __future__ import annotations

import typer

from geosleuth.cli import data, eval, gazetteer, locate, score, serve, tools

app = typer.Typer(
    name="geosleuth",
    help="Agentic image geolocation: locate, score, evaluate, train.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

for module in (locate, score, eval, tools, serve, gazetteer, data):
    module.register(app)


def main() -> None:
    from geosleuth.secrets import install_log_redaction

    install_log_redaction()  # no log line of any command carries a key
    app()
