"""Lazy CLI registration: the help table matches what the command modules register, and
`geosleuth --help` imports none of them (nor NumPy, httpx, pydantic or asyncio)."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from geosleuth.cli.app import COMMANDS, app, command_paths, load_module_commands


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


def test_scoring_ten_twm_rows_loads_no_library_it_does_not_use(tmp_path) -> None:
    """`score` of a few rows pays only for what it runs: no PROJ (a small batch of geodesics goes
    through geographiclib), no numpy.ma (median and CI without np.median / np.quantile), no
    gazetteer, SciPy, shapely or babel (twm reads coordinates only), and the answers are scored."""
    rows = tmp_path / "rows.jsonl"
    with rows.open("w", encoding="utf-8") as out:
        for i in range(10):
            guess = {"lat": 47.37 + i / 1000, "lon": 8.54, "city": "Zurich", "country": "CH"}
            answer = f"Looks like Zurich. {json.dumps(guess)}"
            truth = {"lat": 47.3769, "lon": 8.5417, "city": "Zurich", "country": "Switzerland"}
            out.write(json.dumps({"index": i, "solution_str": answer, "ground_truth": truth}) + "\n")
    code = (
        "import sys, json\n"
        "from geosleuth.cli.app import main\n"
        f"sys.argv = ['geosleuth', 'score', {str(rows)!r}, '--protocol', 'twm', '--format', 'json']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'pyproj', 'scipy', 'shapely', 'babel', 'numpy', 'geographiclib'} or m == 'geosleuth.gazetteer')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    score_text, _, modules = out.rpartition("\n[")
    loaded = set(json.loads("[" + modules))
    assert "numpy" in loaded and "geographiclib.geodesic" in loaded
    assert not {m for m in loaded if m.split(".")[0] in {"pyproj", "scipy", "shapely", "babel"}}, loaded
    assert "numpy.ma" not in loaded and "geosleuth.gazetteer" not in loaded
    assert json.loads(score_text)["metrics"]["acc@2km"] == 100.0


def test_every_help_screen_is_plain_and_imports_no_heavy_library() -> None:
    """`X --help` renders without rich, pydantic, NumPy or asyncio (they cost more than the help)."""
    paths = command_paths()
    assert ["tools", "list"] in paths and ["score"] in paths and ["datasets", "validate"] in paths
    code = (
        "import io, json, sys\n"
        "from contextlib import redirect_stdout\n"
        "from geosleuth.cli.app import main\n"
        "out = {}\n"
        "for path in json.loads(sys.argv[1]):\n"
        "    sys.argv = ['geosleuth', *path, '--help']\n"
        "    buf = io.StringIO()\n"
        "    try:\n"
        "        with redirect_stdout(buf):\n"
        "            main()\n"
        "    except SystemExit as exc:\n"
        "        out[' '.join(path)] = [exc.code, buf.getvalue()]\n"
        "heavy = sorted({m.split('.')[0] for m in sys.modules} & "
        "{'numpy', 'pydantic', 'rich', 'asyncio', 'httpx', 'PIL'})\n"
        "print(json.dumps({'screens': out, 'heavy': heavy}))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, json.dumps(paths)], capture_output=True, text=True, check=True
    )
    found = json.loads(res.stdout)
    assert found["heavy"] == [], found["heavy"]
    for path in paths:
        code_, text = found["screens"][" ".join(path)]
        assert code_ == 0 and text.startswith("Usage: ") and "--help" in text, (path, text[:200])
        assert "╭" not in text  # click's plain layout, as `geosleuth --help`


def test_a_subcommand_is_built_alone_and_its_group_help_lists_every_one() -> None:
    """`data filter` builds `filter` only; the group's help and a typo's suggestion still see all
    of them, as typer's eager group would show them."""
    eager = load_module_commands("geosleuth.cli.data")["data"]
    (group,) = load_module_commands("geosleuth.cli.data", only="data").values()
    assert group.commands == {}
    assert group.list_commands(None) == list(eager.commands)
    assert [p.name for p in group.get_command(None, "filter").params] == [
        p.name for p in eager.commands["filter"].params
    ]
    assert list(group.commands) == ["filter"]
    runner = CliRunner()
    listing = runner.invoke(app, ["data", "--help"])
    with eager.make_context("data", [], resilient_parsing=True, terminal_width=80) as ctx:
        expected = eager.get_help(ctx)
    assert listing.exit_code == 0
    assert listing.output.partition("Commands:")[2].rstrip() == expected.partition("Commands:")[2].rstrip()
    assert "export-verl" in expected.partition("Commands:")[2]
    typo = runner.invoke(app, ["data", "filtr"])
    assert typo.exit_code == 2 and "Did you mean 'filter'?" in typo.output
