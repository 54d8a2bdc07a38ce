"""CLI: ``geosleuth arena`` — rate models from pairwise battles (votes or runs), as GeoArena does."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from geosleuth.cli.options import API_KEY_ENV_HELP, JSON_HELP

DEFAULT_TIE_KM = 1.0  # eval.arena.DEFAULT_TIE_KM (a test ties the two): the help reads it without NumPy


def register(app: typer.Typer) -> None:
    """Attach this module's command to the main app."""
    app.command("arena")(arena_command)


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def arena_command(
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help="A votes file (JSONL rows {model_a, model_b, winner}, winner model_a | model_b | tie | "
            "'tie (bothbad)') or two or more run directories (battles on the samples they share)."
        ),
    ],
    anchor: Annotated[
        str | None,
        typer.Option(
            "--anchor",
            help="Pin one model's BT rating, MODEL=RATING (default: openai/gpt-4o=1000 when that model "
            "is rated, as GeoArena; else ratings average 1000).",
        ),
    ] = None,
    tie_km: Annotated[
        float,
        typer.Option(
            "--tie-km",
            min=0,
            help=f"Runs: errors closer than this many km tie (default {DEFAULT_TIE_KM:g}); both within the "
            "protocol's smallest threshold tie too.",
        ),
    ] = DEFAULT_TIE_KM,
    protocol: Annotated[
        str | None, typer.Option("--protocol", help="Runs: the scoring protocol (default: the first run's).")
    ] = None,
    rounds: Annotated[
        int, typer.Option("--rounds", min=0, help="Bootstrap resamples for the 95 % intervals.")
    ] = 1000,
    seed: Annotated[int, typer.Option("--seed", help="Bootstrap seed.")] = 0,
    as_released: Annotated[
        bool,
        typer.Option(
            "--as-released",
            help="Fit GeoArena's pandas table as bt_mle.py builds it: pairs of a model not seen winning, "
            "losing and (with ties) tying in both seats are left out and it goes unrated (default: every "
            "battle counts).",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print the Markdown leaderboard.")] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write arena.json, arena.md, arena.html and, from runs, battles.jsonl (every battle as a "
            "vote row; and the judge's cache) here.",
        ),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="Runs: an OpenAI-compatible model that decides each battle on the two agents' reasoning "
            "(it never sees the truth); needs --out for its cache.",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option("--judge-base-url", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    judge_api_key_env: Annotated[
        str | None, typer.Option("--judge-api-key-env", help=API_KEY_ENV_HELP)
    ] = None,
) -> None:
    """Rate models from pairwise battles: Bradley-Terry with 95 % intervals, Elo, win-rate matrix."""
    from geosleuth.core.arena import ArenaError, parse_anchor
    from geosleuth.eval.report.arena import (
        arena_markdown,
        arena_result,
        arena_text,
        fights_from_runs,
        read_votes,
    )
    from geosleuth.eval.run.store import RunDirError

    if as_json and markdown:
        _fail("--json and --markdown exclude each other")
    dirs = [p for p in inputs if p.is_dir()]
    if judge_model and not dirs:
        _fail("--judge decides battles between runs; a votes file is already decided")
    if judge_model and out is None:
        _fail("--judge needs --out DIR for its cache of replies")
    try:
        pinned = parse_anchor(anchor) if anchor else None
        if dirs and len(dirs) != len(inputs):
            _fail("give either one votes file or two or more run directories, not both")
        if not dirs:
            if len(inputs) != 1:
                _fail("give one votes file (or run directories)")
            if not inputs[0].is_file():
                _fail(f"{inputs[0]}: no such file or run directory")
            data = read_votes(inputs[0])
        else:
            data = fights_from_runs(dirs, protocol, tie_km)
            if judge_model:
                data = _judged(data, judge_model, judge_base_url, judge_api_key_env, out)
        result = arena_result(data, pinned, rounds, seed, as_released)
    except (ArenaError, RunDirError, ValueError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc))
    if out is not None:
        _write(out, result, arena_markdown(result), data.fights)
    if as_json:
        sys.stdout.write(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    else:
        typer.echo(arena_markdown(result) if markdown else arena_text(result), nl=False)


def _judged(data: Any, model: str, base_url: str | None, key_env: str | None, out: Path | None) -> Any:
    from geosleuth.eval.judges.arena import judge_fights
    from geosleuth.eval.run.config import JudgeSettings

    settings = JudgeSettings(model=model, api_key_env=key_env, **({"base_url": base_url} if base_url else {}))
    assert out is not None  # checked by the caller
    return judge_fights(data, settings, out)


def _write(out: Path, result: dict[str, Any], markdown: str, fights: list[Any]) -> None:
    from geosleuth.eval.report.arena import battle_rows
    from geosleuth.eval.report.arena_markup import arena_page

    try:
        out.mkdir(parents=True, exist_ok=True)
        if fights:  # runs: every battle as a vote row, so `geosleuth arena battles.jsonl` rates the same
            rows = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in battle_rows(fights))
            (out / "battles.jsonl").write_text(rows, encoding="utf-8")
        (out / "arena.json").write_text(
            json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
        (out / "arena.md").write_text(markdown, encoding="utf-8")
        (out / "arena.html").write_text(arena_page(result), encoding="utf-8")
    except OSError as exc:
        _fail(f"cannot write {out}: {exc.strerror or exc}")
