"""Lazy CLI registration: the help table matches what the command modules register, and
`geosleuth --help` imports none of them (nor NumPy, httpx, pydantic or asyncio)."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from geosleuth.cli.app import COMMANDS, app, load_module_commands


def test_the_lazy_table_matches_the_registered_commands() -> None:
    registered: dict[str, str] = {}
    for module in dict.fromkeys(spec.module for spec in COMMANDS.values()):
        for name, command in load_module_commands(module).items():
            registered[name] = module
            assert " ".join((command.help or "").split()).startswith(COMMANDS[name].help), name
    assert registered == {name: spec.module for name, spec in COMMANDS.items()}


def test_help_imports_no_command_module_and_no_heavy_library() -> None:
    code = (
        "import sys\n"
        "from geosleuth.cli.app import main\n"
        "sys.argv = ['geosleuth', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "import json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'numpy', 'httpx', 'pydantic', 'asyncio', 'PIL', 'rich'} or m.startswith('geosleuth.'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    help_text, _, modules = out.rpartition("\n[")
    loaded = json.loads("[" + modules)
    assert loaded == ["geosleuth.cli", "geosleuth.cli.app"], loaded
    for name in COMMANDS:
        assert f"  {name} " in help_text


def test_commands_still_run_and_unknown_ones_fail() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["tools", "list", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)
    bad = runner.invoke(app, ["nonsense"])
    assert bad.exit_code == 2 and "No such command" in bad.output
    sub = runner.invoke(app, ["gazetteer", "--help"])
    assert sub.exit_code == 0 and "reverse" in sub.output
