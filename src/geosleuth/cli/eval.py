"""CLI: `eval`, `report`, `compare` and `datasets validate`.

Heavy modules are imported inside the commands so that `geosleuth --help` stays fast. Every
expected failure (bad dataset, bad config, unusable run dir) is a message and exit code 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from geosleuth.cli.choices import GUARD_MODES, dataset_formats, judges
from geosleuth.cli.options import (
    JSON_HELP,
    ApiKeyEnvOpt,
    BaseUrlOpt,
    MaxTokensOpt,
    MaxTurnsOpt,
    ModelOpt,
    ObserverOpt,
    ObserverUrlOpt,
    PromptOpt,
    ProviderOpt,
    ReasoningEffortOpt,
    ResizeFactorOpt,
    SamplesOpt,
    TemperatureOpt,
    ToolCallingOpt,
    ToolsOpt,
    VerifierOpt,
    VerifierViewOpt,
)

FORMAT_HELP = (
    f"Dataset format: {' | '.join(dataset_formats())} (auto: from the columns), or package.module:adapter."
)
JUDGES_HELP = f"Judges to run, comma-separated: {','.join(judges())}."
JsonOpt = Annotated[bool, typer.Option("--json", help=JSON_HELP)]
JudgeKeyEnvOpt = Annotated[
    str | None, typer.Option("--judge-api-key-env", help="Environment variable with the judge's API key.")
]

NOT_CONFIG = frozenset({"resume", "retry_failed", "config", "as_json"})
"""`eval` flags that steer this invocation rather than set the run's config."""

datasets_app = typer.Typer(help="Inspect benchmark datasets.", no_args_is_help=True)


def _fail(message: str, code: int = 2) -> None:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _os_error(exc: OSError) -> str:
    return f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else str(exc)


def _print_headline(summary: dict[str, Any], run_dir: Path) -> None:
    metrics = summary.get("metrics", {})
    parts = []
    for name, metric in metrics.items():
        value = metric.get("value") if isinstance(metric, dict) else metric
        if value is None:
            continue
        if isinstance(value, int):  # a count (answered samples), not a measurement
            parts.append(f"{name}={value}")
        else:
            parts.append(f"{name}={value:.2f}%" if "acc" in name else f"{name}={value:.1f}")
    typer.echo(
        f"{summary['n_finished']}/{summary['n_samples']} finished, {summary['n_failed']} failed/missing"
    )
    typer.echo("  ".join(parts))
    for note in summary.get("notes") or ():
        typer.echo(f"note: {note}", err=True)
    typer.echo(f"report: {run_dir / 'summary.md'}  html: {run_dir / 'html' / 'index.html'}")


def _print_summary(summary: dict[str, Any], run_dir: Path, as_json: bool) -> None:
    """summary.json on stdout with ``--json``, else the headline."""
    if as_json:
        _print_json(summary)
    else:
        _print_headline(summary, run_dir)


def _print_json(value: Any) -> None:
    from geosleuth.secrets import redact_text

    sys.stdout.write(redact_text(json.dumps(value, indent=2, ensure_ascii=False)) + "\n")


def eval_command(
    dataset: Annotated[
        str | None, typer.Argument(help="Dataset file or folder (omit with --resume).")
    ] = None,
    out: Annotated[str | None, typer.Option("--out", "-o", help="Run directory.")] = None,
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = None,
    prompt: PromptOpt = None,
    tools: ToolsOpt = None,
    samples: SamplesOpt = None,
    verifier: VerifierOpt = None,
    verifier_view: VerifierViewOpt = None,
    max_turns: MaxTurnsOpt = None,
    temperature: TemperatureOpt = None,
    tool_calling: ToolCallingOpt = None,
    resize_factor: ResizeFactorOpt = None,
    observer: ObserverOpt = None,
    observer_base_url: ObserverUrlOpt = None,
    max_tokens: MaxTokensOpt = None,
    reasoning_effort: ReasoningEffortOpt = None,
    provider: ProviderOpt = None,
    concurrency: Annotated[int | None, typer.Option(help="Samples in flight at once, per shard.")] = None,
    limit: Annotated[int | None, typer.Option(help="Only the first K samples.")] = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            help="Seconds per sample, counted from its first model request: start-up (image, "
            "tools, gazetteer) is not, up to 600 s or --timeout if longer. Without a model "
            "(offline), from its start.",
        ),
    ] = None,
    resume: Annotated[
        bool, typer.Option(help="Continue the run in --out (re-running there does too).")
    ] = False,
    retry_failed: Annotated[bool, typer.Option(help="Re-run only the samples recorded as failed.")] = False,
    config: Annotated[Path | None, typer.Option(help="YAML or TOML file with any of these settings.")] = None,
    format: Annotated[str | None, typer.Option(help=FORMAT_HELP)] = None,
    images: Annotated[str | None, typer.Option(help="Image folder, when not beside the table.")] = None,
    split: Annotated[str | None, typer.Option(help="Dataset split.")] = None,
    seed: Annotated[int | None, typer.Option(help="Seed (choice shuffling, bootstrap).")] = None,
    protocol: Annotated[str | None, typer.Option(help="Scoring protocol.")] = None,
    breakdown: Annotated[list[str] | None, typer.Option(help="Extra breakdown field (repeatable).")] = None,
    backend: Annotated[str | None, typer.Option(help="local or ray.")] = None,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address.")] = None,
    ray_batch_size: Annotated[int | None, typer.Option(help="Samples per batch sent to a Ray actor.")] = None,
    ray_resource: Annotated[
        list[str] | None,
        typer.Option(help="NAME=AMOUNT of a custom Ray resource each actor needs (pins actors; repeatable)."),
    ] = None,
    ray_restart_wait: Annotated[
        float | None,
        typer.Option(help="Seconds a lost Ray actor may take to come back before the run gives up on it."),
    ] = None,
    shards: Annotated[
        int | None,
        typer.Option(
            help="Shards of the run, each talking to endpoints[i % len] (default: one per endpoint)."
        ),
    ] = None,
    shard: Annotated[
        str | None,
        typer.Option(
            help="Run only shard I of N (e.g. $SLURM_ARRAY_TASK_ID/8) into OUT/shards/I-of-N; "
            "then `geosleuth merge OUT`."
        ),
    ] = None,
    agent_fn: Annotated[
        str | None, typer.Option(help="module:function replacing the built-in agent.")
    ] = None,
    skip_invalid: Annotated[bool, typer.Option(help="Evaluate valid rows when some rows are bad.")] = False,
    judge_model: Annotated[str | None, typer.Option(help="Judge model (enables LLM judges).")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="Judge endpoint base URL.")] = None,
    judge_api_key_env: JudgeKeyEnvOpt = None,
    judges: Annotated[str | None, typer.Option(help=JUDGES_HELP)] = None,
    report: Annotated[bool, typer.Option(help="Write the report at the end.")] = True,
    allow_metadata: Annotated[
        bool,
        typer.Option(
            help="Let the agent read the images' metadata (EXIF GPS, captions, XMP, IPTC); by default "
            "it sees pixels only. For EXIF-aware systems evaluated on purpose, not leaderboard figures."
        ),
    ] = False,
    leak_guard: Annotated[
        str | None,
        typer.Option(
            help=f"Search / POI results dropped before the model sees them: {' | '.join(GUARD_MODES)} "
            "(default hosts: the dataset's source sites and the sample's id or file name; strict: also "
            "results stating coordinates within 1 km of the truth)."
        ),
    ] = None,
    leak_host: Annotated[
        list[str] | None, typer.Option(help="Another source host whose results are dropped (repeatable).")
    ] = None,
    manifest: Annotated[
        str | None,
        typer.Option(help="Frozen manifest (`geosleuth datasets freeze`): refuse a dataset that differs."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the agent over a benchmark into a resumable run directory, then report."""
    given = dict(locals())  # every flag by its name: eval.config.config_flags maps them to the config
    from geosleuth.eval.datasets.loading import DatasetError
    from geosleuth.eval.run.config import (
        MANIFEST,
        ConfigError,
        config_flags,
        parse_shard,
        read_config_file,
        read_manifest,
        resolve_config,
        shard_dir,
    )
    from geosleuth.eval.run.pipeline import execute, prepare_run
    from geosleuth.eval.run.runner import RunAborted
    from geosleuth.eval.run.store import RunDirError

    try:
        file_values = read_config_file(config) if config else {}
        if resume and dataset is None and "dataset" not in file_values:
            if not out:
                _fail("--resume without a dataset needs --out RUN_DIR")
            run_dir = shard_dir(Path(out), *parse_shard(shard)) if shard else Path(out)
            file_values = {**read_manifest(run_dir)["config"], **file_values}
        flags = config_flags({k: v for k, v in given.items() if k not in NOT_CONFIG})
        cfg = resolve_config(file_values, flags)
        prepared = prepare_run(cfg)
    except (ConfigError, DatasetError, RunDirError, ValueError) as exc:
        _fail(str(exc))
    except OSError as exc:  # e.g. --out names a file, or the disk is read-only
        _fail(_os_error(exc))
    _warn_unusable(prepared)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    bar = Progress(
        TextColumn("eval"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[failed]} failed"),
        TimeRemainingColumn(), console=Console(stderr=True),
    )  # fmt: skip
    job = bar.add_task("eval", total=len(prepared.samples), failed=0)

    def progress(trajectory: Any, stats: Any) -> None:
        bar.update(job, total=stats.total, completed=stats.done + stats.skipped, failed=stats.failed)

    run_dir = prepared.run_dir
    try:
        with bar:
            import asyncio

            stats = asyncio.run(execute(prepared, retry_failed=retry_failed, on_result=progress))
    except RunAborted as exc:
        kept = (
            f"finished samples are saved in {run_dir}; fix this and re-run the same command to resume"
            if (run_dir / MANIFEST).exists()
            else f"no sample was recorded and {run_dir} was not left a run; fix this and run it again"
        )
        _fail(f"stopped: {exc}\n{kept}", code=1)
    except (ValueError, RunDirError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_os_error(exc))
    except KeyboardInterrupt:
        typer.echo("interrupted: finished samples are saved; re-run the same command to resume", err=True)
        raise typer.Exit(130) from None
    del prepared  # the dataset in memory: the report streams the run back from disk
    retried = (
        f", {stats.batches_retried} batch(es) run again after losing their worker"
        if stats.batches_retried
        else ""
    )
    typer.echo(
        f"ran {stats.done} sample(s) in {stats.wall_s:.1f} s "
        f"({stats.skipped} already done, {stats.failed} failed{retried})",
        err=True,
    )
    try:
        if cfg.judge is not None:
            _run_judges(run_dir, cfg.judge)
        if cfg.report:
            from geosleuth.eval.report.write import write_report

            _print_summary(write_report(run_dir), run_dir, as_json)
        elif as_json:  # no report: what this invocation ran
            from dataclasses import asdict

            _print_json({"run_dir": str(run_dir), **asdict(stats)})
    except (RunDirError, ValueError) as exc:  # the samples are saved: `geosleuth report` can redo this
        _fail(str(exc))
    except OSError as exc:
        _fail(_os_error(exc))
    if cfg.shard is not None:
        typer.echo(
            f"shard {cfg.shard} done; when every shard is: geosleuth merge {cfg.out}",
            err=True,
        )
    if stats.done and stats.statuses.get("model_error", 0) == stats.done:
        _fail(
            f"all {stats.done} sample(s) run now failed with model errors (is the endpoint up?); "
            f"see the error field in {run_dir / 'trajectories.jsonl'}",
            code=1,
        )


def _warn_unusable(prepared: Any) -> None:
    """Bad rows and missing images, said before the run (the samples stay recorded as failed)."""
    if prepared.dataset.problems:
        typer.echo(f"warning: skipped {len(prepared.dataset.problems)} bad row(s); see run.json", err=True)
    if not prepared.dataset.missing_images:  # no set of every selected id to build
        return
    selected = {sample.id for sample in prepared.samples}
    missing = [m for m in prepared.dataset.missing_images if m.sample_id in selected]
    if missing:
        typer.echo(
            f"warning: {len(missing)} of {len(selected)} image(s) not found (first: {missing[0]}); "
            "those samples are recorded as failed (input_error)",
            err=True,
        )


def _run_judges(run_dir: Path, settings: Any) -> None:
    import asyncio

    from geosleuth.eval.judges.tasks import judge_outcome, run_judges
    from geosleuth.eval.run.pipeline import read_samples
    from geosleuth.eval.run.store import load_run_trajectories

    samples = read_samples(run_dir)
    asyncio.run(run_judges(run_dir, samples, load_run_trajectories(run_dir), settings))
    typer.echo(judge_outcome(run_dir, samples, settings.tasks)[0], err=True)


def report_command(
    run_dir: Annotated[Path, typer.Argument(help="Run directory written by `geosleuth eval`.")],
    protocol: Annotated[str | None, typer.Option(help="Scoring protocol (default: the run's).")] = None,
    breakdown: Annotated[list[str] | None, typer.Option(help="Extra breakdown field (repeatable).")] = None,
    html: Annotated[bool, typer.Option(help="Write the offline HTML report.")] = True,
    plots: Annotated[bool, typer.Option(help="Write PNG plots.")] = True,
    judge_model: Annotated[str | None, typer.Option(help="Judge model: run LLM judges first.")] = None,
    judge_base_url: Annotated[str | None, typer.Option(help="Judge endpoint base URL.")] = None,
    judge_api_key_env: JudgeKeyEnvOpt = None,
    judge_key_env: Annotated[
        str | None, typer.Option("--judge-key-env", hidden=True, help="Old spelling of --judge-api-key-env.")
    ] = None,
    judges: Annotated[str | None, typer.Option(help=JUDGES_HELP)] = None,
    consistency_judge: Annotated[
        str | None,
        typer.Option(help="Model that re-derives each level from the reasoning: adds GeoAgent's R_con."),
    ] = None,
    consistency_base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint of the consistency judge.")
    ] = None,
    consistency_api_key_env: Annotated[
        str | None, typer.Option(help="Environment variable holding the consistency judge's key.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Metrics, tool-use statistics, plots and the HTML report of a run directory."""
    from geosleuth.eval.report.write import write_report
    from geosleuth.eval.run.config import judge_settings
    from geosleuth.eval.run.store import RunDirError

    try:
        settings = judge_settings(judge_model, judge_base_url, judge_api_key_env or judge_key_env, judges)
        if settings is not None:
            _run_judges(run_dir, settings)
        consistency = (
            _consistency(consistency_judge, consistency_base_url, consistency_api_key_env)
            if consistency_judge
            else None
        )
        summary = write_report(run_dir, protocol, breakdown, html=html, plots=plots, consistency=consistency)
    except (RunDirError, ValueError, OSError) as exc:
        _fail(str(exc))
    _print_summary(summary, run_dir, as_json)


def _consistency(model: str, base_url: str | None, api_key_env: str | None) -> tuple[str, Any]:
    """GeoAgent's consistency judge (the training reward's, as the paper sets it) as a report scorer."""
    import os

    from geosleuth.training.rewards.consistency import ConsistencyJudge, JudgeConfig

    if api_key_env and not os.environ.get(api_key_env):
        raise ValueError(f"--consistency-api-key-env {api_key_env}: that environment variable is not set")
    key = os.environ.get(api_key_env) if api_key_env else None
    judge = ConsistencyJudge(JudgeConfig(model=model, base_url=base_url, api_key=key))
    return model, judge.score_texts_sync


def merge_command(
    run_dir: Annotated[Path, typer.Argument(help="The --out of the `eval --shard I/N` jobs.")],
    report: Annotated[bool, typer.Option(help="Write the report of the merged run.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Merge the shards of a run (eval --shard I/N) into one run directory, then report."""
    from geosleuth.eval.report.write import write_report
    from geosleuth.eval.run.merge import merge_shards
    from geosleuth.eval.run.store import RunDirError

    try:
        result = merge_shards(run_dir)
    except (RunDirError, ValueError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_os_error(exc))
    typer.echo(
        f"merged {result.shards} shards: {result.samples} samples, {result.trajectories} records, "
        f"{result.images} tool images linked",
        err=True,
    )
    if result.unfinished:
        shown = ", ".join(f"{i}: {n}" for i, n in sorted(result.unfinished.items()))
        typer.echo(
            f"warning: unfinished shards (samples without a record, counted as missing): {shown}; "
            "resume them with --resume --shard I/N, then merge again",
            err=True,
        )
    if report:
        try:
            _print_summary(write_report(run_dir), run_dir, as_json)
        except (RunDirError, ValueError) as exc:
            _fail(str(exc))
        except OSError as exc:
            _fail(_os_error(exc))


def compare_command(
    runs: Annotated[list[Path], typer.Argument(help="Two or more run directories.")],
    out: Annotated[Path | None, typer.Option(help="Write compare.json and compare.md here.")] = None,
    protocol: Annotated[str | None, typer.Option(help="Scoring protocol for all runs.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Runs side by side on their common samples, with paired significance tests."""
    from geosleuth.eval.report.compare import compare_markdown, compare_runs
    from geosleuth.eval.run.store import RunDirError

    if len(runs) < 2:
        _fail("compare needs at least two run directories")
    try:
        result = compare_runs(runs, protocol)
        text = compare_markdown(result)
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "compare.json").write_text(
                json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            (out / "compare.md").write_text(text, encoding="utf-8")
    except (RunDirError, ValueError) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_os_error(exc))
    if as_json:
        _print_json(result)
    else:
        typer.echo(text)


@datasets_app.command("validate")
def validate_command(
    path: Annotated[str, typer.Argument(help="Dataset file or folder.")],
    format: Annotated[str, typer.Option(help=FORMAT_HELP)] = "auto",
    images: Annotated[str | None, typer.Option(help="Image folder.")] = None,
    seed: Annotated[int, typer.Option(help="Seed for multiple-choice shuffling.")] = 0,
    as_json: JsonOpt = False,
) -> None:
    """Check every row (images exist, coordinates valid, ids unique); exit 1 on bad rows."""
    from geosleuth.eval.datasets.loading import DatasetError, load_dataset

    try:
        dataset = load_dataset(path, format, images, seed=seed)
    except DatasetError as exc:
        _fail(str(exc))
    bad = bool(dataset.problems or dataset.missing_images)
    if as_json:
        _print_json(
            {
                "format": dataset.format,
                "layout": dataset.layout or dataset.format,
                "fingerprint": dataset.fingerprint,
                "valid_samples": len(dataset.samples),
                "problems": [str(p) for p in dataset.problems],
                "missing_images": [str(p) for p in dataset.missing_images],
            }
        )
        if bad:
            raise typer.Exit(1)
        return
    typer.echo(f"layout: {dataset.layout or dataset.format}")
    typer.echo(
        f"{dataset.format}: {len(dataset.samples)} valid sample(s), {len(dataset.problems)} problem(s), "
        f"{len(dataset.missing_images)} missing image(s)"
    )
    typer.echo(f"fingerprint {dataset.fingerprint}")
    for problem in [*dataset.problems, *dataset.missing_images]:
        typer.echo(f"  {problem}")
    if dataset.problems or dataset.missing_images:
        raise typer.Exit(1)


@datasets_app.command("freeze")
def freeze_command(
    path: Annotated[str, typer.Argument(help="Dataset file or folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Manifest file to write (JSON).")],
    format: Annotated[str, typer.Option(help=FORMAT_HELP)] = "auto",
    images: Annotated[str | None, typer.Option(help="Image folder.")] = None,
    split: Annotated[str | None, typer.Option(help="Dataset split.")] = None,
) -> None:
    """Write a shareable manifest: sample ids, image SHA-256s and one hash of the ground truth
    (not the truth itself). `eval --manifest FILE` then refuses any other copy of the benchmark."""
    from geosleuth.eval.datasets.frozen import FrozenMismatch, freeze_manifest
    from geosleuth.eval.datasets.loading import DatasetError, load_dataset

    try:
        dataset = load_dataset(path, format, images, split=split)
        if dataset.problems:
            raise DatasetError(
                f"{len(dataset.problems)} bad row(s), first: {dataset.problems[0]}; fix them first"
            )
        manifest = freeze_manifest(Path(path).stem, dataset.format, dataset.samples)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    except (DatasetError, FrozenMismatch) as exc:
        _fail(str(exc))
    except OSError as exc:
        _fail(_os_error(exc))
    truth = manifest["truth_sha256"][:12]
    typer.echo(f"froze {manifest['n_samples']} sample(s) of {path} into {out} (truth {truth}…)")


@datasets_app.command("overlap")
def overlap_command(
    first: Annotated[str, typer.Argument(help="Dataset A (e.g. the training set).")],
    second: Annotated[str, typer.Argument(help="Dataset B (e.g. the benchmark).")],
    format: Annotated[str, typer.Option(help=FORMAT_HELP)] = "auto",
    strict: Annotated[bool, typer.Option(help="Exit 1 when the datasets share any sample.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Samples A and B share: by id, by image SHA-256, and by near-identical coordinates with the
    same image size."""
    from dataclasses import asdict

    from geosleuth.eval.datasets.loading import DatasetError, load_dataset
    from geosleuth.eval.datasets.overlap import NEAR_M, find_overlap

    try:
        a, b = (load_dataset(p, format, check_images=False) for p in (first, second))
        found = find_overlap(a.samples, b.samples)
    except DatasetError as exc:
        _fail(str(exc))
    if as_json:
        _print_json(asdict(found))
    else:
        typer.echo(f"A {first}: {found.n_a} sample(s); B {second}: {found.n_b} sample(s)")
        for label, items in (
            ("same id", found.by_id),
            ("same image file", found.by_image),
            (f"same place (within {NEAR_M:g} m) and image size", found.by_place),
        ):
            shown = ", ".join(str(i if isinstance(i, str) else f"{i[0]}={i[1]}") for i in items[:10])
            typer.echo(
                f"{label}: {len(items)}" + (f" ({shown}{' …' if len(items) > 10 else ''})" if items else "")
            )
    if strict and found.any:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.command("eval")(eval_command)
    app.command("report")(report_command)
    app.command("compare")(compare_command)
    app.command("merge")(merge_command)
    app.add_typer(datasets_app, name="datasets")
