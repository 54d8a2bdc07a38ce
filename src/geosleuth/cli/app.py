"""The ``geosleuth`` command: one typer app, one module per command group.

Command modules are registered lazily: ``geosleuth --help`` lists every command from the
table below without importing any of them (their imports — asyncio, NumPy, pydantic models,
httpx — cost more than the whole help screen), and running a command imports only its own
module. ``tests/test_cli_startup.py`` checks that the table matches what the modules register.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from typing import Any, NamedTuple

import typer
from typer.core import TyperGroup


class LazyCommand(NamedTuple):
    module: str  # a module with ``register(app)`` that adds this command
    help: str  # the command's one-line help, shown by ``geosleuth --help``


COMMANDS: dict[str, LazyCommand] = {
    "locate": LazyCommand(
        "geosleuth.cli.locate",
        "Locate IMAGE(s): answer, address, confidence, evidence and a short trace per image.",
    ),
    "score": LazyCommand(
        "geosleuth.cli.score",
        "Score prediction files: Acc@k, median/mean km, GeoGuessr, level accuracy, 95 % CIs.",
    ),
    "eval": LazyCommand(
        "geosleuth.cli.eval", "Run the agent over a benchmark into a resumable run directory, then report."
    ),
    "report": LazyCommand(
        "geosleuth.cli.eval",
        "Metrics, tool-use statistics, plots and the HTML report of a run directory.",
    ),
    "compare": LazyCommand(
        "geosleuth.cli.eval", "Runs side by side on their common samples, with paired significance tests."
    ),
    "arena": LazyCommand(
        "geosleuth.cli.arena",
        "Rate models from pairwise battles: Bradley-Terry with 95 % intervals, Elo, win-rate matrix.",
    ),
    "merge": LazyCommand(
        "geosleuth.cli.eval",
        "Merge the shards of a run (eval --shard I/N) into one run directory, then report.",
    ),
    "tool": LazyCommand(
        "geosleuth.cli.tools", "Run one tool and print its result as JSON (images are written to files)."
    ),
    "mcp": LazyCommand("geosleuth.cli.tools", "Serve the tools over MCP (stdio or streamable HTTP)."),
    "serve": LazyCommand(
        "geosleuth.cli.serve",
        "Serve the web app: locate photos live (Locate) and browse evaluation runs (Runs).",
    ),
    "datasets": LazyCommand("geosleuth.cli.eval", "Inspect benchmark datasets."),
    "tools": LazyCommand("geosleuth.cli.tools", "Inspect the tool suite."),
    "gazetteer": LazyCommand("geosleuth.cli.gazetteer", "Offline gazetteer: build, search, reverse."),
    "lmms-eval-tasks": LazyCommand(
        "geosleuth.cli.harness",
        "Print the folder to pass to lmms-eval's --include_path (one task per layout).",
    ),
    "data": LazyCommand(
        "geosleuth.cli.data",
        "Training data: export for verl / SFT, synthesise, filter by difficulty, sample, build MCQ.",
    ),
}


def load_module_commands(module: str, only: str | None = None) -> dict[str, Any]:
    """Every click command that ``module.register`` adds, by name; ``only``: just that one.

    Typer turns every registered function's signature into click parameters at once, so running or
    helping one command builds that one (bench/startup_bench.py measures the difference).
    """
    sub = typer.Typer()
    sub.callback()(lambda: None)  # a callback makes typer build a group even for one command
    importlib.import_module(module).register(sub)
    registered = (*sub.registered_commands, *sub.registered_groups)
    pending: dict[str, list[Any]] = {}
    if only is not None and any(info.name == only for info in registered):
        sub.registered_commands = [info for info in sub.registered_commands if info.name == only]
        sub.registered_groups = [
            _without_commands(info, pending) for info in sub.registered_groups if info.name == only
        ]
    group = typer.main.get_command(sub)
    commands = dict(group.commands)  # type: ignore[attr-defined]
    for name, infos in pending.items():
        if name in commands:
            _LazySubGroup.defer(commands[name], infos, sub)
    for command in commands.values():
        _plain_help(command)
    return commands


def _without_commands(info: Any, pending: dict[str, list[Any]]) -> Any:
    """A copy of a sub-app's group info with its commands set aside in ``pending``: running or
    helping ``data filter`` builds ``filter``, not the group's eight commands."""
    app_copy = copy.copy(info.typer_instance)
    pending[info.name] = list(app_copy.registered_commands)
    app_copy.registered_commands = []
    info_copy = copy.copy(info)
    info_copy.typer_instance = app_copy
    return info_copy


def command_paths() -> list[list[str]]:
    """Every command and subcommand the CLI registers, as argument paths (``["tools", "list"]``):
    what the help-screen test and the start-up bench walk."""
    paths: list[list[str]] = []

    def walk(prefix: list[str], command: Any) -> None:
        paths.append(prefix)
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk([*prefix, name], sub)

    for module in dict.fromkeys(spec.module for spec in COMMANDS.values()):
        for name, command in load_module_commands(module).items():
            walk([name], command)
    return paths


def _plain_help(command: Any) -> None:
    """Help in click's plain layout, as ``geosleuth --help``: importing typer's rich renderer costs
    more than the rest of a help screen. Nested groups get the light ``--help`` too."""
    if hasattr(command, "rich_markup_mode"):
        command.rich_markup_mode = None
    if type(command) is TyperGroup:
        command.__class__ = _LightHelpGroup
    for sub in getattr(command, "commands", {}).values():
        _plain_help(sub)


class _LightHelpGroup(TyperGroup):
    """A typer group whose own ``--help`` flag is coerced without pydantic.

    Typer builds a pydantic adapter for every parameter it processes, a group's absent
    ``--help`` flag included (pydantic's imports on the way to a subcommand), then passes its
    ``None`` through unused. A bool flag needs no adapter: typer's pass-through coercion gives
    the same values (None stays None, a bool stays a bool).
    """

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)
        if option is not None and getattr(option, "_runtime_param", False) is None:
            from typer._coercion import PassThroughRuntimeParam

            option._runtime_param = PassThroughRuntimeParam(
                parameter_info=option.type_descriptor.parameter_info, annotation=bool
            )
        return option


class _ListingGroup(_LightHelpGroup):
    """A group that knows when it renders its own help: the listing needs each subcommand's
    name and one line, which a lazy group gives without building the subcommand."""

    _listing = False

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


class _LazySubGroup(_ListingGroup):
    """A command group whose subcommands are built from their typer infos when first named."""

    _pending: dict[str, Any]
    _typer: Any

    @classmethod
    def defer(cls, group: Any, infos: list[Any], app: typer.Typer) -> None:
        """Turn a built group without commands into one that builds ``infos`` on demand."""
        group.__class__ = cls
        group._pending = {
            info.name or typer.main.get_command_name(info.callback.__name__): info for info in infos
        }
        group._typer = app

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*self._pending, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if self._listing and cmd_name in self._pending and cmd_name not in self.commands:
            return _listed(cmd_name, self._pending[cmd_name])  # the group's help: name and one line
        if cmd_name not in self.commands:
            # an unknown name builds them all: typer suggests close names from the built ones
            for name in [cmd_name] if cmd_name in self._pending else list(self._pending):
                self.commands[name] = self._build(self._pending[name])
        return self.commands.get(cmd_name)

    def _build(self, info: Any) -> Any:
        command = typer.main.get_command_from_info(
            info,
            pretty_exceptions_short=self._typer.pretty_exceptions_short,
            rich_markup_mode=self._typer.rich_markup_mode,
        )
        _plain_help(command)
        return command


def _listed(name: str, info: Any) -> Any:
    """What a group's help screen reads of a subcommand (help text, hidden, deprecated), without
    turning its signature into parameters as typer's ``get_command_from_info`` does."""
    text = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
    return typer.core.TyperCommand(
        name, help=text, short_help=info.short_help, hidden=info.hidden, deprecated=info.deprecated
    )


class LazyGroup(_ListingGroup):
    """A typer group whose commands are imported on first use, not at start-up."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(dict.fromkeys([*COMMANDS, *self.commands]))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in self.commands:
            return self.commands[cmd_name]
        spec = COMMANDS.get(cmd_name)
        if spec is None:  # not in the table: a module may have added it; look everywhere once
            for module in dict.fromkeys(s.module for s in COMMANDS.values()):
                self._load(module)
            return self.commands.get(cmd_name)
        if self._listing:  # the help screen needs the name and one line, not the command
            return typer.core.TyperCommand(cmd_name, help=spec.help, short_help=spec.help)
        self._load(spec.module, cmd_name)
        return self.commands.get(cmd_name)

    def _load(self, module: str, only: str | None = None) -> None:
        for name, command in load_module_commands(module, only).items():
            self.commands.setdefault(name, command)


app = typer.Typer(
    name="geosleuth",
    help="Agentic image geolocation: locate, score, evaluate, train.",
    cls=LazyGroup,
    rich_markup_mode=None,  # plain help here: typer's rich renderer is a costly import
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        from geosleuth import __version__

        typer.echo(f"geosleuth {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_print_version, help="Print the version and exit."
    ),
) -> None:
    """Agentic image geolocation: locate, score, evaluate, train."""
    from geosleuth.secrets import install_log_redaction

    install_log_redaction()  # no log line of any command carries a key (runs for commands, not --help)


def main() -> None:
    try:
        app()
    except ImportError as exc:  # an optional package a command needs: say which extra installs it
        from geosleuth.cli.choices import install_hint

        hint = install_hint(exc)
        if hint is None:
            raise
        typer.echo(f"error: {hint}", err=True)
        raise SystemExit(2) from None
