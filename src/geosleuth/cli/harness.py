"""CLI: ``geosleuth lmms-eval-tasks`` — where the shipped lmms-eval task folder is."""

from __future__ import annotations

from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.command("lmms-eval-tasks")(lmms_eval_tasks)


def lmms_eval_tasks(
    list_tasks: Annotated[bool, typer.Option("--list", help="Also list the task names, one a line.")] = False,
) -> None:
    """Print the folder to pass to lmms-eval's --include_path (one task per layout)."""
    from geosleuth.integrations import lmms_eval_tasks_folder

    folder = lmms_eval_tasks_folder()
    if not folder.is_dir():
        typer.echo(f"error: the lmms-eval task folder is missing from this install ({folder})", err=True)
        raise typer.Exit(1)
    typer.echo(str(folder))
    if list_tasks:
        for path in sorted(folder.glob("*.yaml")):
            typer.echo(path.stem)
