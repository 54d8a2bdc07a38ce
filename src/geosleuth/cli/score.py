"""CLI: ``geosleuth score`` — score prediction files under a published protocol."""

from __future__ import annotations

import csv
import io
import json
import os
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from geosleuth.scoring import FileScore, Score


def _protocol_help() -> str:
    """The choices, from the protocol registry (users' registered protocols included)."""
    from geosleuth.cli.choices import protocols

    return (
        f"One of: {', '.join(protocols())}, or package.module:PROTOCOL. Each reproduces that "
        "paper's released evaluation (docs/evaluation.md has one table of them all); default is "
        "geosleuth's own. Accuracies are percentages."
    )


class OutputFormat(StrEnum):
    table = "table"
    json = "json"
    csv = "csv"


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.command("score")(score)


def score(
    files: Annotated[
        list[Path], typer.Argument(help="Prediction files: JSONL, JSON or CSV, one row per sample.")
    ],
    protocol: Annotated[str, typer.Option("--protocol", help=_protocol_help())] = "default",
    as_json: Annotated[bool, typer.Option("--json", help="Print the scores as JSON.")] = False,
    as_csv: Annotated[bool, typer.Option("--csv", help="Print the scores as CSV rows.")] = False,
    output_format: Annotated[
        OutputFormat | None,
        typer.Option("--format", "-f", hidden=True, help="Old spelling of --json / --csv."),
    ] = None,
    protocol_short: Annotated[
        str | None, typer.Option("-p", hidden=True, help="Old short form of --protocol.")
    ] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            help="Break results down by a row field (e.g. data_source, split), or by a grouping of the "
            "truth: income, m49_region, m49_subregion, economy, settlement (with their disparity).",
        ),
    ] = None,
    truth: Annotated[
        Path | None,
        typer.Option(
            "--truth",
            help="Ground truth, joined to predictions by id (with or without the image extension): "
            "a table, or a dataset folder in any layout `eval` reads.",
        ),
    ] = None,
    thresholds: Annotated[
        str | None,
        typer.Option(
            "--thresholds", help="Override distance thresholds: classic | map | street | '0.5,2,10'."
        ),
    ] = None,
    rows: Annotated[
        Path | None, typer.Option("--rows", help="Also write per-row results here (.csv or .jsonl).")
    ] = None,
    columns: Annotated[
        list[str] | None,
        typer.Option(
            "--columns",
            help="Name the columns of a file the reader does not know: NAME=COLUMN pairs, comma-separated "
            "(NAME: id, pred_lat, pred_lon, true_lat, true_lon, text, country, admin1, admin2, city), "
            "e.g. --columns pred_lat=y_lat,pred_lon=y_lon.",
        ),
    ] = None,
    verifier_model: Annotated[
        str | None,
        typer.Option(
            "--verifier-model",
            help="geovista: a model whose verdict replaces the level rule (GeoVista's --model_verifier).",
        ),
    ] = None,
    verifier_base_url: Annotated[
        str | None, typer.Option("--verifier-base-url", help="OpenAI-compatible endpoint of the verifier.")
    ] = None,
    verifier_api_key_env: Annotated[
        str | None, typer.Option("--verifier-api-key-env", help="Environment variable holding its key.")
    ] = None,
    map_file: Annotated[
        Path | None,
        typer.Option(
            "--map",
            help="geoguessr-map: GeoBench's dataset metadata.json (its bounds; its images are the truth "
            "of rows without their own).",
        ),
    ] = None,
    map_bounds: Annotated[
        str | None,
        typer.Option("--map-bounds", help="geoguessr-map: the map as MIN_LAT,MIN_LNG,MAX_LAT,MAX_LNG."),
    ] = None,
    judge_model: Annotated[
        str | None,
        typer.Option(
            "--judge",
            help="wherebench: ask this OpenAI-compatible model the released judge questions (path score, "
            "coordinate conversion, clue use) instead of the offline rules.",
        ),
    ] = None,
    judge_base_url: Annotated[
        str | None, typer.Option("--judge-base-url", help="OpenAI-compatible endpoint of the judge.")
    ] = None,
    judge_api_key_env: Annotated[
        str | None, typer.Option("--judge-api-key-env", help="Environment variable holding the judge's key.")
    ] = None,
) -> None:
    """Score prediction files: Acc@k, median/mean km, GeoGuessr, level accuracy, 95 % CIs."""
    # Scoring does no linear algebra, yet OpenBLAS starts a thread per core when NumPy loads and
    # they spin a while: set before that import, one thread saves that CPU (the 10-row CPU was
    # 1.5x its wall time on 2 cores; on more cores it is more). A value the user set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from dataclasses import replace

    from geosleuth.core.metrics import resolve_thresholds
    from geosleuth.scoring import ScoreInputError, get_protocol, score_file
    from geosleuth.scoring.columns import parse_columns

    if protocol_short is not None:
        typer.echo("warning: -p for --protocol is deprecated (-p means --prompt elsewhere)", err=True)
        protocol = protocol_short
    if as_json and as_csv:
        typer.echo("error: --json and --csv exclude each other", err=True)
        raise typer.Exit(2)
    if output_format is None:
        output_format = OutputFormat.json if as_json else OutputFormat.csv if as_csv else OutputFormat.table
    try:
        chosen = get_protocol(protocol)
        if thresholds:
            chosen = replace(chosen, thresholds=resolve_thresholds(thresholds))
        mapping = parse_columns(columns)
    except ValueError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if map_file is not None or map_bounds is not None:
        chosen, truth = _on_map(chosen, map_file, map_bounds, truth)
    if verifier_model and chosen.level_rule != "geovista":
        typer.echo(f"error: --verifier-model applies to --protocol geovista, not {chosen.name}", err=True)
        raise typer.Exit(2)
    if judge_model and chosen.file_scorer is None:
        typer.echo(f"error: --judge applies to --protocol wherebench, not {chosen.name}", err=True)
        raise typer.Exit(2)
    try:
        truth_rows = _truth_rows(truth) if truth is not None and chosen.file_scorer is None else None
    except ScoreInputError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    verifier = _verifier(verifier_model, verifier_base_url, verifier_api_key_env) if verifier_model else None
    judge = _judge(judge_model, judge_base_url, judge_api_key_env) if judge_model else None
    results: list[FileScore] = []
    failed = False
    try:
        for path in files:
            try:
                results.append(
                    score_file(
                        path,
                        chosen,
                        truth_path=truth,
                        by=by,
                        verifier=verifier,
                        keep_rows=rows is not None,
                        judge=judge,
                        columns=mapping,
                        truth_rows=truth_rows,
                    )
                )
            except ScoreInputError as exc:
                typer.echo(f"error: {exc}", err=True)
                failed = True
    finally:
        if verifier is not None:
            verifier.close()
        if judge is not None:
            judge.close()
    if results:
        _emit(results, output_format)
        if rows is not None:
            _write_rows(rows, results)
    for empty in (r for r in results if r.score.n == 0):
        typer.echo(f"error: {empty.path}: no predictions to score (the file is empty)", err=True)
        failed = True
    if failed:
        raise typer.Exit(1)


def _truth_rows(truth: Path) -> Any:
    """A dataset folder's truth rows, read as `eval` reads it (None: a table `score` reads itself)."""
    from geosleuth.eval.datasets.truth import dataset_truth_rows

    return dataset_truth_rows(truth)


def _on_map(
    chosen: Any, map_file: Path | None, bounds: str | None, truth: Path | None
) -> tuple[Any, Path | None]:
    """The protocol with its map's bounds (and the map file as truth when none is given)."""
    from dataclasses import replace

    from geosleuth.scoring import ScoreInputError
    from geosleuth.scoring.geoguessr_map import parse_bounds
    from geosleuth.scoring.geoguessr_map_files import map_bounds

    if chosen.name != "geoguessr-map":
        typer.echo(
            f"error: --map and --map-bounds apply to --protocol geoguessr-map, not {chosen.name}", err=True
        )
        raise typer.Exit(2)
    if map_file is not None and bounds is not None:
        typer.echo("error: --map and --map-bounds exclude each other", err=True)
        raise typer.Exit(2)
    try:
        found = map_bounds(map_file) if map_file is not None else parse_bounds(str(bounds))
    except (ScoreInputError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    corners = (found.min_lat, found.min_lng, found.max_lat, found.max_lng)
    return replace(chosen, map_bounds=corners), truth if truth is not None or map_file is None else map_file


def _verifier(model: str, base_url: str | None, api_key_env: str | None) -> Any:
    from geosleuth.eval.judges.tasks import GeoVistaVerifier
    from geosleuth.eval.run.config import JudgeSettings

    settings = JudgeSettings(model=model, api_key_env=api_key_env)
    if base_url:
        settings = settings.model_copy(update={"base_url": base_url})
    return GeoVistaVerifier(settings)


def _judge(model: str, base_url: str | None, api_key_env: str | None) -> Any:
    from geosleuth.eval.run.config import JudgeSettings
    from geosleuth.eval.wherebench.judge import WhereBenchJudge

    settings = JudgeSettings(model=model, api_key_env=api_key_env)
    if base_url:
        settings = settings.model_copy(update={"base_url": base_url})
    return WhereBenchJudge(settings)


def _emit(results: list[FileScore], output_format: OutputFormat) -> None:
    if output_format is OutputFormat.json:
        if len(results) == 1:
            payload: dict[str, Any] = results[0].score.to_dict()
        else:
            payload = {"files": {r.path: r.score.to_dict() for r in results}}
        typer.echo(json.dumps(payload, ensure_ascii=False))
    elif output_format is OutputFormat.csv:
        typer.echo(_csv(results), nl=False)
        for r in results:
            for w in r.score.warnings:
                typer.echo(f"warning: {r.path}: {w}", err=True)
    else:
        _tables(results)


def _csv(results: list[FileScore]) -> str:
    from geosleuth.bounds.textrows import spreadsheet_safe

    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(["file", "group", "metric", "value", "ci95_low", "ci95_high", "n", "parsed"])
    for r in results:
        parts: list[tuple[str, Score]] = [("", r.score), *r.score.groups.items()]
        for group, s in parts:
            d = s.to_dict(include_warnings=False)
            for name, value in d["metrics"].items():
                low, high = d["ci95"].get(name, [None, None])
                cells = [r.path, group, name, _cell(value), _cell(low), _cell(high), s.n, s.parsed]
                writer.writerow([spreadsheet_safe(c) for c in cells])
    return buffer.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _tables(results: list[FileScore]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out, err = Console(), Console(stderr=True)
    for r in results:
        s = r.score
        d = s.to_dict()
        table = Table(title=escape(f"{r.path} — protocol {r.protocol} — n={s.n}, parsed={s.parsed}"))
        table.add_column("metric")
        table.add_column("value", justify="right")
        table.add_column("95% CI", justify="right")
        groups = {k: g.to_dict(include_warnings=False) for k, g in s.groups.items()}
        for key in groups:
            table.add_column(f"{key} (n={s.groups[key].n})", justify="right")
        for name, value in d["metrics"].items():
            ci = d["ci95"].get(name)
            cells = [_fmt(name, value), f"{ci[0]:.2f}–{ci[1]:.2f}" if ci and None not in ci else ""]
            cells += [_fmt(name, g["metrics"].get(name)) for g in groups.values()]
            table.add_row(name, *cells)
        out.print(table)
        if s.disparity:
            out.print(escape(disparity_line(s.disparity)), highlight=False, soft_wrap=True)
        for w in s.warnings:
            err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)


def disparity_line(d: dict[str, Any]) -> str:
    """One line of a grouping's disparity: best and worst group, gap with its interval, ratio."""
    lo, hi = d["gap_ci95"]
    ratio = "–" if d["ratio"] is None else f"{d['ratio']:.3f}"
    return (
        f"disparity of {d['metric']} over {d['n_groups']} groups: best {d['best']['group']} "
        f"{d['best']['value']:.2f} %, worst {d['worst']['group']} {d['worst']['value']:.2f} %, gap "
        f"{d['gap']:.2f} points [{lo:.2f}, {hi:.2f}], ratio {ratio}, macro mean {d['macro_mean']:.2f} %"
    )


def _fmt(name: str, value: float | None) -> str:
    if value is None:
        return "–"
    if name.startswith(("acc", "text_acc", "all_acc")):
        return f"{value:.2f} %"
    return f"{value:,.3f}" if name.endswith("_km") else f"{value:,.2f}"


def _write_rows(path: Path, results: list[FileScore]) -> None:
    """Stream per-row records to CSV or JSONL (columns are the union over the files' first rows);
    a CSV cell that starts like a formula is written as text (`textrows.spreadsheet_safe`)."""
    from geosleuth.bounds.textrows import spreadsheet_safe

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as fh:
            if path.suffix.lower() == ".csv":
                firsts = [next(r.iter_rows(), None) for r in results]
                names = list(dict.fromkeys(["file", *(k for rec in firsts if rec for k in rec)]))
                writer = csv.DictWriter(fh, fieldnames=[spreadsheet_safe(n) for n in names])
                writer.writeheader()
                for r in results:
                    for rec in r.iter_rows():
                        writer.writerow(
                            {
                                spreadsheet_safe(k): spreadsheet_safe(v)
                                for k, v in {"file": r.path, **rec}.items()
                            }
                        )
            else:
                for r in results:
                    for rec in r.iter_rows():
                        fh.write(json.dumps({"file": r.path, **rec}, ensure_ascii=False) + "\n")
    except OSError as exc:
        typer.echo(f"error: cannot write {path}: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
