"""CLI: ``geosleuth serve`` — the local web app to watch the agent work and browse runs."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated

import typer

from geosleuth.bounds.extras import install_line
from geosleuth.cli.options import BaseUrlOpt, ModelOpt, ObserverOpt, ObserverUrlOpt, PromptOpt


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.command("serve")(serve)


def serve(
    host: Annotated[
        str, typer.Option("--host", help="Address to bind (loopback unless you mean it).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="TCP port.")] = 8765,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    prompt: PromptOpt = "geovista",
    runs: Annotated[
        list[Path] | None,
        typer.Option("--runs", help="Evaluation run directory, or a folder of them (repeatable)."),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option("--workdir", help="Keep job files here (default: a temporary folder removed on exit)."),
    ] = None,
    max_upload_mb: Annotated[
        float, typer.Option("--max-upload-mb", min=0.1, help="Largest accepted upload.")
    ] = 25.0,
    observer: ObserverOpt = None,
    observer_base_url: ObserverUrlOpt = None,
) -> None:
    """Serve the web app: locate photos live (Locate) and browse evaluation runs (Runs)."""
    from pydantic import ValidationError

    from geosleuth.agent import AgentConfig, load_style

    if model is not None:
        try:
            load_style(prompt)
        except (KeyError, ValueError, OSError) as exc:
            typer.echo(f"error: unknown prompt style {prompt!r}: {exc}", err=True)
            raise typer.Exit(2) from None
    chosen = {"observer": observer, "observer_base_url": observer_base_url}
    agent_options = {k: v for k, v in chosen.items() if v}
    if observer is not None and model is None:
        typer.echo("error: --observer describes images to a text-only --model: give --model too", err=True)
        raise typer.Exit(2)
    try:
        AgentConfig(model=model, base_url=base_url, **agent_options)
    except ValidationError as exc:
        typer.echo(f"error: {exc.errors()[0]['msg'].removeprefix('Value error, ')}", err=True)
        raise typer.Exit(2) from None
    missing = [str(p) for p in runs or [] if not p.is_dir()]
    if missing:
        typer.echo(f"error: --runs folder not found: {', '.join(missing)}", err=True)
        raise typer.Exit(2)
    if not _is_loopback(host):
        typer.echo(
            f"warning: binding to {host}: anyone who can reach this address can run jobs on this machine",
            err=True,
        )
    try:
        import uvicorn
    except ImportError:
        typer.echo(f"error: the web app needs uvicorn and starlette: {install_line('web')}", err=True)
        raise typer.Exit(2) from None
    from geosleuth.webapp import ServeSettings, create_app
    from geosleuth.webapp.app import LOOPBACK_HOSTS

    settings = ServeSettings(
        model=model,
        base_url=base_url,
        prompt_style=prompt,
        runs=list(runs or []),
        workdir=workdir,
        max_upload_bytes=int(max_upload_mb * 1024 * 1024),
        agent_options=agent_options,
    )
    if workdir is not None:
        from geosleuth.webapp.casestore import WorkdirInUse, claim_workdir

        try:
            with claim_workdir(workdir):  # a clear refusal now, not a traceback from the app's start-up
                pass
        except WorkdirInUse as exc:
            typer.echo(f"error: --workdir {workdir}: {exc}", err=True)
            raise typer.Exit(1) from None
    hosts = LOOPBACK_HOSTS if _is_loopback(host) else ["*"]
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"geosleuth web app on http://{shown}:{port}/  (Ctrl-C to stop)")
    try:
        uvicorn.run(create_app(settings, allowed_hosts=hosts), host=host, port=port, log_level="warning")
    except OSError as exc:
        typer.echo(f"error: cannot serve on {host}:{port}: {exc}", err=True)
        raise typer.Exit(1) from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
