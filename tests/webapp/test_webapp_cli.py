"""`geosleuth serve` argument checks (the server itself is exercised by the other webapp tests)."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from geosleuth.cli import serve


def cli() -> typer.Typer:
    app = typer.Typer()
    serve.register(app)
    app.command("noop")(lambda: None)  # a second command keeps `serve` a named subcommand
    return app


def test_serve_rejects_a_missing_runs_folder(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli(), ["serve", "--runs", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "--runs folder not found" in result.output
    assert "Traceback" not in result.output


def test_serve_rejects_an_unknown_prompt_style() -> None:
    result = CliRunner().invoke(cli(), ["serve", "--model", "m", "--prompt", "nonsense"])
    assert result.exit_code == 2 and "unknown prompt style 'nonsense'" in result.output


def test_loopback_detection() -> None:
    assert serve._is_loopback("127.0.0.1") and serve._is_loopback("::1") and serve._is_loopback("localhost")
    assert not serve._is_loopback("0.0.0.0") and not serve._is_loopback("example.org")


def test_serve_refuses_a_workdir_another_server_holds(tmp_path: Path) -> None:
    from geosleuth.webapp.casestore import claim_workdir

    with claim_workdir(tmp_path / "w"):  # as a running server holds it
        result = CliRunner().invoke(cli(), ["serve", "--workdir", str(tmp_path / "w"), "--port", "1"])
    assert result.exit_code == 1 and "another geosleuth server is using this workdir" in result.output
    assert "Traceback" not in result.output
