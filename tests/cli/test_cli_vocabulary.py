"""One option vocabulary across commands: ``--json`` wherever a result is printed, ``-p`` only
for ``--prompt``, ``--format`` only for a dataset's layout, key flags ending in
``api-key-env``, ``--version``; old spellings still work (hidden); help choice lists come from
the registries; a missing optional package names the extra that installs it."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Any, get_args

import pytest
from typer.testing import CliRunner

from geosleuth.cli.app import COMMANDS, app, load_module_commands

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from eval_data import PLACES, make_csv_dataset, write_plan  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "data"
GPT5 = FIXTURES / "published_predictions" / "imageo2_test_gpt5.jsonl"
PRINTS_A_RESULT = {  # commands whose result is printed in a human form unless --json
    "locate", "score", "eval", "report", "compare", "merge", "datasets validate", "tools list",
    "tools cache", "data export-verl", "data export-swift", "data export-sft", "data build-mcq",
    "data verl-tool-config",
}  # fmt: skip


def _commands() -> dict[str, Any]:
    """Every leaf command by its full name ("datasets validate")."""
    found: dict[str, Any] = {}
    for module in dict.fromkeys(spec.module for spec in COMMANDS.values()):
        for name, command in load_module_commands(module).items():
            if hasattr(command, "commands"):  # a group (typer vendors its own click)
                for sub, leaf in command.commands.items():
                    found[f"{name} {sub}"] = leaf
            else:
                found[name] = command
    return found


def _visible_options(command: Any) -> list[Any]:
    return [p for p in command.params if p.param_type_name == "option" and not p.hidden]


def test_the_version_is_printed() -> None:
    from geosleuth import __version__

    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0 and result.output.strip() == f"geosleuth {__version__}"


ALWAYS_JSON = {
    "tool",
    "gazetteer search",
    "gazetteer reverse",
    "data filter",
    "data sample",
    "data synthesize",
}
"""Commands whose only output is JSON: they accept --json too, so scripts can pass it everywhere."""


def test_json_is_spelled_json_wherever_a_result_is_printed() -> None:
    commands = _commands()
    for name in PRINTS_A_RESULT | ALWAYS_JSON:
        opts = {o for p in _visible_options(commands[name]) for o in p.opts}
        assert "--json" in opts, name


def test_always_json_commands_take_json_and_print_the_same() -> None:
    runner = CliRunner()
    plain = runner.invoke(app, ["gazetteer", "search", "Luzern", "--limit", "1"])
    flagged = runner.invoke(app, ["gazetteer", "search", "Luzern", "--limit", "1", "--json"])
    assert plain.exit_code == flagged.exit_code == 0, flagged.output
    assert (
        json.loads(flagged.stdout) == json.loads(plain.stdout)
        and json.loads(plain.stdout)[0]["country_code"] == "CH"
    )


def test_short_p_format_and_key_flags_mean_one_thing() -> None:
    for name, command in _commands().items():
        for option in _visible_options(command):
            if "-p" in option.opts:
                assert "--prompt" in option.opts, name
            if "--format" in option.opts:
                assert (option.help or "").startswith("Dataset format"), name
            for flag in option.opts:
                if "key" in flag:
                    assert flag.endswith("api-key-env"), (name, flag)


def test_help_lists_every_registered_choice() -> None:
    """Every door's help reads the registries: each loaded entry's name is in the help text."""
    from geosleuth.agent.config import AgentConfig
    from geosleuth.agent.prompting import available_styles
    from geosleuth.cli import choices
    from geosleuth.eval.datasets.catalog import DATASET_FORMATS
    from geosleuth.eval.judges.catalog import JUDGES
    from geosleuth.scoring.catalog import PROTOCOLS
    from geosleuth.tools.catalog import TOOLS
    from geosleuth.training.rewards.catalog import REWARDS

    assert choices.prompt_styles() == available_styles() and "geoagent" in available_styles()
    assert get_args(AgentConfig.model_fields["provider"].annotation) == choices.PROVIDERS
    assert get_args(get_args(AgentConfig.model_fields["tool_calling"].annotation)[0]) == choices.TOOL_CALLING
    from geosleuth.tools.leakguard import GUARD_MODES

    assert tuple(GUARD_MODES) == choices.GUARD_MODES
    for registry in (PROTOCOLS, DATASET_FORMATS, JUDGES, TOOLS, REWARDS):
        assert set(registry.load_all()) == set(registry.names()), registry.kind  # every name loads
    runner = CliRunner()

    def help_of(*command: str) -> str:
        return " ".join(runner.invoke(app, [*command, "--help"], env={"COLUMNS": "400"}).output.split())

    assert all(name in help_of("score") for name in PROTOCOLS) and "wherebench" in PROTOCOLS
    for command in (["locate"], ["serve"], ["eval"]):
        assert all(style in help_of(*command) for style in available_styles()), command
    eval_help = help_of("eval")
    assert all(fmt in eval_help for fmt in choices.dataset_formats()) and "hf" in eval_help
    assert all(judge in eval_help for judge in JUDGES)
    assert all(tool in help_of("locate") for tool in TOOLS)
    assert all(reward in help_of("data", "export-verl") for reward in REWARDS)


def test_score_json_and_csv_and_the_old_spellings() -> None:
    runner = CliRunner()
    new = runner.invoke(app, ["score", str(GPT5), "--protocol", "twm", "--json"])
    old = runner.invoke(app, ["score", str(GPT5), "--protocol", "twm", "--format", "json"])
    assert new.exit_code == old.exit_code == 0
    assert json.loads(new.stdout) == json.loads(old.stdout)
    short = runner.invoke(app, ["score", str(GPT5), "-p", "twm", "--json"])
    assert short.exit_code == 0 and json.loads(short.stdout) == json.loads(new.stdout)
    assert "deprecated" in short.stderr
    rows = list(csv.reader(runner.invoke(app, ["score", str(GPT5), "--csv"]).stdout.splitlines()))
    assert rows[0][:3] == ["file", "group", "metric"] and len(rows) > 5
    both = runner.invoke(app, ["score", str(GPT5), "--json", "--csv"])
    assert both.exit_code == 2


def _fake_run(tmp_path: Path, data: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    plan = {sid: {"lat": lat, "lon": lon, "country": country} for sid, lat, lon, country, _ in PLACES}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / f"{name}.json", plan)))
    out = tmp_path / name
    result = CliRunner().invoke(
        app,
        ["eval", str(data), "--out", str(out), "--agent-fn", "eval_fake_agent:planned", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["n_finished"] == 8
    return out


def test_eval_report_compare_and_validate_print_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
    data = make_csv_dataset(tmp_path / "bench")
    a = _fake_run(tmp_path, data, "a", monkeypatch)
    b = _fake_run(tmp_path, data, "b", monkeypatch)
    runner = CliRunner()
    report = runner.invoke(app, ["report", str(a), "--json", "--no-html", "--no-plots"])
    assert json.loads(report.stdout)["metrics"]["acc@1km"]["value"] == 100.0
    compare = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    assert compare.exit_code == 0 and json.loads(compare.stdout)["n_common"] == 8
    valid = runner.invoke(app, ["datasets", "validate", str(data), "--json"])
    assert valid.exit_code == 0 and json.loads(valid.stdout)["valid_samples"] == 8
    (data / "images" / "paris.jpg").unlink()
    invalid = runner.invoke(app, ["datasets", "validate", str(data), "--json"])
    assert invalid.exit_code == 1 and len(json.loads(invalid.stdout)["missing_images"]) == 1


def test_report_takes_the_old_judge_key_spelling(tmp_path: Path) -> None:
    for flag in ("--judge-api-key-env", "--judge-key-env"):
        result = CliRunner().invoke(app, ["report", str(tmp_path / "none"), flag, "X"])
        assert "No such option" not in result.output and result.exit_code == 2


def test_a_missing_optional_package_names_its_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    result = CliRunner().invoke(
        app, ["data", "export-verl", str(data), "-o", str(tmp_path / "x.parquet"), "--tools", ""]
    )
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "pip install 'geosleuth[hf]'" in result.output and "pyarrow" in result.output
    assert "pip install -e '.[hf]'" in result.output  # a checkout's form too (issue 41)


def test_every_extras_hint_is_said_one_way() -> None:
    """An extra's install hint comes from `bounds.extras.install_line` (both forms), never a literal
    that a checkout user cannot run: the postcode hint was written by hand once."""
    src = Path(__file__).resolve().parents[2] / "src" / "geosleuth"
    literal = "pip install 'geosleuth["
    by_hand = [
        str(path.relative_to(src))
        for path in src.rglob("*.py")
        if path.name != "extras.py" and literal in path.read_text(encoding="utf-8")
    ]
    assert by_hand == []


def test_build_mcq_labels_countries_from_coordinates(tmp_path: Path) -> None:
    folder = tmp_path / "bench"
    make_csv_dataset(folder)
    rows = list(csv.DictReader((folder / "data.csv").open()))
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "image", "lat", "lon"])
        writer.writeheader()
        writer.writerows({k: r[k] for k in ("id", "image", "lat", "lon")} for r in rows)
    out = tmp_path / "mcq.jsonl"
    result = CliRunner().invoke(app, ["data", "build-mcq", str(folder), "-o", str(out)])
    assert result.exit_code == 0, result.output
    questions = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(questions) == 8
    by_id: dict[str, Any] = {q["id"]: q for q in questions}
    paris = by_id["paris"]
    assert paris["choices"][ord(paris["answer"]) - ord("A")] in ("France", "FR")


def test_the_first_gazetteer_build_says_what_it_is_doing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.gazetteer import build

    ran: list[str] = []
    monkeypatch.setattr(build, "build_steps", lambda out: [(n, lambda n=n: ran.append(n)) for n in "abc"])
    target = build.ensure_built(tmp_path / "gaz", progress=False)
    err = capsys.readouterr().err
    assert ran == ["a", "b", "c"] and (target / "DONE").exists()
    assert "building the offline gazetteer" in err and str(tmp_path / "gaz") in err
    assert all(f"gazetteer {i}/3: {n}" in err for i, n in enumerate("abc", 1))
    build.ensure_built(tmp_path / "gaz", progress=False)  # built: silent
    assert capsys.readouterr().err == ""


def test_tools_cache_prints_json(tmp_path: Path) -> None:
    env = {"GEOSLEUTH_TOOL_CACHE": str(tmp_path / "c.sqlite"), "GEOSLEUTH_REDIS_URL": ""}
    result = CliRunner().invoke(app, ["tools", "cache", "purge", "--json"], env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "action": "purge", "cache": str(tmp_path / "c.sqlite"), "removed": 0, "entries": 0
    }  # fmt: skip


def test_the_eval_headline_prints_counts_as_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    plan = {sid: {"lat": lat, "lon": lon} for sid, lat, lon, *_ in PLACES}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(tmp_path / "run"), "--agent-fn", "eval_fake_agent:planned"]
    )
    assert result.exit_code == 0, result.output
    headline = result.stdout.splitlines()[1]
    assert "acc@25km=100.00%" in headline and "median_km=0.0" in headline  # a distance in km, no %


def test_eval_json_without_a_report_prints_what_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    plan = {sid: {"lat": lat, "lon": lon} for sid, lat, lon, *_ in PLACES}
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    args = ["eval", str(data), "--out", str(tmp_path / "run"), "--agent-fn", "eval_fake_agent:planned"]
    result = CliRunner().invoke(app, [*args, "--no-report", "--json"])
    assert result.exit_code == 0, result.output
    ran = json.loads(result.stdout)
    assert (ran["done"], ran["failed"], ran["statuses"]) == (8, 0, {"ok": 8})


def test_data_commands_print_what_they_wrote_as_json(tmp_path: Path) -> None:
    runner = CliRunner()
    config = runner.invoke(app, ["data", "verl-tool-config", "-o", str(tmp_path / "t.yaml"), "--json"])
    assert config.exit_code == 0, config.output
    assert json.loads(config.stdout) == {
        "out": str(tmp_path / "t.yaml"), "tools": ["image_zoom_in_tool", "search_web", "maps_geocode"]
    }  # fmt: skip
    data = make_csv_dataset(tmp_path / "bench")
    mcq = runner.invoke(app, ["data", "build-mcq", str(data), "-o", str(tmp_path / "q.jsonl"), "--json"])
    assert mcq.exit_code == 0, mcq.output
    assert json.loads(mcq.stdout) == {"out": str(tmp_path / "q.jsonl"), "written": 8, "skipped": []}


def test_a_requested_bar_off_a_terminal_still_prints_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.gazetteer import build

    monkeypatch.setattr(build, "build_steps", lambda out: [("only step", lambda: None)])
    build.ensure_built(tmp_path / "gaz", progress=True)  # `gazetteer build` asks for a bar
    assert "gazetteer 1/1: only step" in capsys.readouterr().err


def test_eval_takes_every_locate_flag_docs_models_shows() -> None:
    """docs/models.md: "`geosleuth locate` flags shown above work the same in `geosleuth eval`"."""
    import re

    text = (Path(__file__).resolve().parents[2] / "docs" / "models.md").read_text()
    table = text.split("## Launch / configuration lines", 1)[1].split("\n\n", 2)[1]
    shown = {f for row in table.splitlines() for f in re.findall(r"(--[a-z][a-z-]+)", row.split("|")[3])}
    shown -= {"--chat-template"}  # the server's flag, named in a note about vLLM
    assert {"--tool-calling", "--resize-factor", "--api-key-env"} <= shown
    eval_opts = {o for p in _commands()["eval"].params for o in getattr(p, "opts", [])}
    assert shown <= eval_opts, shown - eval_opts


def test_timeout_and_concurrency_help_say_what_they_do_now() -> None:
    runner = CliRunner()

    def help_of(command: str) -> str:
        return " ".join(runner.invoke(app, [command, "--help"], env={"COLUMNS": "400"}).output.split())

    assert "Seconds per sample, counted from its first model request" in help_of("eval")
    assert "would pass half the memory available at start" in help_of("locate")
