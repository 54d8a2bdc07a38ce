"""CLI: ``geosleuth data …`` — training data: verl / SFT export, synthesis, filtering, sampling, MCQ."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict, TypeVar

import typer

from geosleuth.cli.choices import one_of, rewards
from geosleuth.cli.options import AlwaysJsonOpt
from geosleuth.training.leaks import EXIF_HELP
from geosleuth.training.qwen.processor_config import DEFAULT_FRAME, ImageFrameSettings, resolve_frame

data_app = typer.Typer(
    name="data",
    help="Training data: export for verl / SFT, synthesise, filter by difficulty, sample, build MCQ.",
    no_args_is_help=True,
)

T = TypeVar("T")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(1)


def _guard(fn: Callable[[], T]) -> T:
    """Known failure kinds become one line on stderr and exit 1, never a traceback."""
    from geosleuth.cli.choices import install_hint
    from geosleuth.eval.datasets.loading import DatasetError

    try:
        return fn()
    except (ValueError, OSError, KeyError, DatasetError) as exc:
        raise _fail(str(exc).strip("'\"")) from None
    except ImportError as exc:
        hint = install_hint(exc)
        if hint is None:
            raise
        raise _fail(hint) from None


def _load_samples(dataset: Path, fmt: str, images: Path | None) -> list[Any]:
    from geosleuth.eval.datasets.loading import load_dataset

    ds = load_dataset(dataset, fmt, images, check_images=False)
    for problem in ds.problems[:5]:
        typer.echo(f"skipped {problem}", err=True)
    if len(ds.problems) > 5:
        typer.echo(f"skipped {len(ds.problems) - 5} more bad row(s)", err=True)
    if not ds.samples:
        raise ValueError(f"{dataset}: no usable samples")
    return list(ds.samples)


def _write_samples(path: Path, samples: list[Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(s.model_dump_json() + "\n" for s in samples), encoding="utf-8")


def _tool_schemas(names: str | None, settings: Path | None, allow_exif: bool = False) -> list[dict[str, Any]]:
    """OpenAI schemas of the chosen geosleuth tools (every registered one but the answer-reading
    ``exif_gps`` when ``names`` is None); ``exif_gps`` only with ``allow_exif``."""
    if names == "":
        return []
    try:
        from geosleuth.tools import build_registry
    except ImportError:
        raise ValueError("the geosleuth tool registry is not available in this installation") from None
    from geosleuth.tools.config import ToolSettings
    from geosleuth.training.toolcall import ANSWER_READING, training_tools

    registry = build_registry(ToolSettings.load(settings))
    chosen = [n.strip() for n in names.split(",") if n.strip()] if names else None
    picked = training_tools(registry.names(), chosen, allow_exif, registry.alias_names())
    if ANSWER_READING.intersection(picked):
        typer.echo(
            "warning: exif_gps reads the photo's own GPS tag; in training it can leak the answer", err=True
        )
    return registry.subset(picked).schemas()


AllowExifOpt = Annotated[bool, typer.Option("--allow-exif", help=EXIF_HELP)]
BenchmarkOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--benchmark-manifest",
        help="Frozen benchmark manifest (`geosleuth datasets freeze`): warn when one of its images is "
        "in the training data (repeatable).",
    ),
]
StrictOpt = Annotated[
    bool,
    typer.Option("--strict", help="Refuse, instead of warning, training data holding a benchmark's images."),
]


def _check_benchmarks(samples: list[Any], manifests: list[Path] | None, strict: bool) -> None:
    """Training and test kept apart (SpotAgent C.2): the samples whose image file is a frozen
    benchmark's are named, as a warning or, with ``strict``, as the error that stops the export."""
    if not manifests:
        return
    from geosleuth.eval.datasets.frozen import benchmark_images, image_sha256, read_frozen

    shared = benchmark_images([read_frozen(p) for p in manifests], image_sha256(samples))
    if not shared:
        return
    more = f" … and {len(shared) - 10} more" if len(shared) > 10 else ""
    message = f"{len(shared)} training sample(s) are benchmark images: {', '.join(shared[:10])}{more}"
    if strict:
        raise ValueError(f"{message}; remove them from the training data")
    typer.echo(f"warning: {message}", err=True)


JsonOpt = Annotated[bool, typer.Option("--json", help="Print what was written as JSON.")]


def _wrote(as_json: bool, line: str, **result: Any) -> None:
    """The result line of a writing command, or the same facts as JSON with ``--json``."""
    typer.echo(json.dumps(result, ensure_ascii=False, default=str) if as_json else line)


DatasetArg = Annotated[Path, typer.Argument(help="Dataset file or folder (any format `eval` reads).")]
FormatOpt = Annotated[str, typer.Option("--format", help="Dataset format (auto-detected by default).")]
ImagesOpt = Annotated[Path | None, typer.Option("--images", help="Image folder, when not beside the table.")]
MaxPixelsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-pixels",
        "--pixel-budget",
        min=1,
        help="Pixels the model sees (processor max_pixels; default: the --model folder's, "
        f"else {DEFAULT_FRAME.max_pixels}).",
    ),
]
MinPixelsOpt = Annotated[
    int | None,
    typer.Option(
        min=1,
        help=f"The processor's min_pixels (default: the --model folder's, else {DEFAULT_FRAME.min_pixels}).",
    ),
]
ResizeFactorOpt = Annotated[
    int | None,
    typer.Option(
        min=0,
        help="Side multiple, patch × merge size (Qwen2.5-VL 28, Qwen3-VL 32; 0 for none; "
        f"default: the --model folder's, else {DEFAULT_FRAME.resize_factor}), so zoom boxes map from the "
        "exact frame the model sees.",
    ),
]


class _Frame(TypedDict):
    """The frame fields both export options take."""

    pixel_budget: int
    min_pixels: int
    resize_factor: int


def _image_frame(
    model: Path | None, max_pixels: int | None, min_pixels: int | None, resize_factor: int | None
) -> tuple[_Frame, dict[str, Any]]:
    """The frame the model's processor gives (each setting: the option, else the local ``--model``
    folder's processor config, else the default), as export-option keywords, and the report of
    each value with where it came from (for the "image frame" line and ``--json``)."""
    frame, source = resolve_frame(
        ImageFrameSettings(resize_factor, min_pixels, max_pixels), model, DEFAULT_FRAME
    )
    # DEFAULT_FRAME sets all three, so each has a value
    assert frame.max_pixels is not None and frame.min_pixels is not None and frame.resize_factor is not None
    chosen: _Frame = {
        "pixel_budget": frame.max_pixels,
        "min_pixels": frame.min_pixels,
        "resize_factor": frame.resize_factor,
    }
    report = {
        "max_pixels": chosen["pixel_budget"],
        "min_pixels": chosen["min_pixels"],
        "resize_factor": chosen["resize_factor"],
        "source": source,
    }
    return chosen, report


def _frame_line(frame: dict[str, Any]) -> str:
    """One line per export saying each frame value and its source, so a wrong frame is seen."""
    source = frame["source"]
    return (
        f"image frame: max_pixels {frame['max_pixels']} ({source['max_pixels']}), min_pixels "
        f"{frame['min_pixels']} ({source['min_pixels']}), resize factor {frame['resize_factor']} "
        f"({source['resize_factor']})"
    )


@data_app.command("export-verl")
def export_verl_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Parquet file to write.")],
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    style: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            "--style",
            help="Agent prompt style for the system / user text "
            "(default: the --reward's paper's style, else spotagent).",
        ),
    ] = None,
    tools: Annotated[
        str | None, typer.Option(help="Comma-separated tool names (default: the style's tools; '' for none).")
    ] = None,
    tool_settings: Annotated[Path | None, typer.Option(help="Tool settings file (providers, cache).")] = None,
    reward: Annotated[
        str | None,
        typer.Option(
            help=f"The reward the run will use ({one_of(rewards())}): checked against the style's "
            "answer format."
        ),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            help="Local model directory: its chat template is checked for tool rendering, its processor "
            "config gives the image frame."
        ),
    ] = None,
    chat_template: Annotated[
        str,
        typer.Option(
            help="auto | model | qwen-vl-tools | FILE: the template verl renders tool rollouts with."
        ),
    ] = "auto",
    pixel_budget: MaxPixelsOpt = None,
    min_pixels: MinPixelsOpt = None,
    resize_factor: ResizeFactorOpt = None,
    embed_images: Annotated[bool, typer.Option(help="Embed image bytes (portable across nodes).")] = True,
    data_source: Annotated[
        str | None, typer.Option(help="data_source column (default: the sample's).")
    ] = None,
    allow_exif: AllowExifOpt = False,
    benchmark_manifest: BenchmarkOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write verl RL parquet rows: prompt with the image, ground truth, tools_kwargs for zoom.

    The image size the prompt states is the frame the processor gives the model (Qwen
    ``smart_resize``): its settings are read from a local ``--model`` folder's
    ``preprocessor_config.json`` unless given as options.

    With tools, the chat template verl renders rollouts with is checked: a template that does
    not render tool schemas and ``<tool_response>`` turns (Qwen2.5-VL's stock one) is replaced
    by a shipped one, written beside the parquet for the launch script.
    """
    from geosleuth.agent.prompting import load_style
    from geosleuth.training.qwen.chat_template import prepare_chat_template
    from geosleuth.training.verl.export import VerlExportOptions, export_verl, style_for_reward

    def run() -> None:
        chosen = style_for_reward(style, reward)
        frame, frame_report = _image_frame(model, pixel_budget, min_pixels, resize_factor)
        samples = _load_samples(dataset, fmt, images)
        _check_benchmarks(samples, benchmark_manifest, strict)
        names = tools if tools is not None else ",".join(load_style(chosen).tools)
        options = VerlExportOptions(
            style=chosen,
            schemas=tuple(_tool_schemas(names, tool_settings, allow_exif)),
            embed_images=embed_images,
            data_source=data_source,
            **frame,
        )
        report = export_verl(samples, out, options)
        for f in report.failed:
            typer.echo(f"failed {f['sample_id']}: {f['reason']}", err=True)
        lines = [
            f"wrote {report.written} rows to {out} ({len(report.failed)} failed; prompt style {chosen})",
            _frame_line(frame_report),
        ]
        template = None
        if options.schemas:
            tpl = prepare_chat_template(out.parent, chat_template, model)
            template = tpl["template"]
            for problem in tpl.get("model_problems", []):
                typer.echo(f"warning: {model}: {problem}", err=True)
            if tpl["template"] == "model":
                lines.append(f"chat template: {model}'s own (renders tools and tool responses)")
            else:
                lines.append(
                    f"chat template: {tpl['template']} written to {out.parent}/chat_template.jinja; "
                    "pass it to verl with "
                    f'actor_rollout_ref.model.custom_chat_template="$(cat {out.parent}/chat_template.hydra)"'
                )
        _wrote(
            as_json, "\n".join(lines), out=str(out), written=report.written, failed=report.failed,
            prompt_style=chosen, chat_template=template, image_frame=frame_report,
        )  # fmt: skip

    _guard(run)


@data_app.command("export-swift")
def export_swift_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write.")],
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    style: Annotated[
        str, typer.Option("--prompt", "--style", help="Agent prompt style for the system / user text.")
    ] = "thinking_with_map",
    tools: Annotated[
        str | None, typer.Option(help="Comma-separated tool names for the `tools` column (default: none).")
    ] = None,
    tool_settings: Annotated[Path | None, typer.Option(help="Tool settings file (providers, cache).")] = None,
    model: Annotated[
        Path | None,
        typer.Option(help="Local model directory: its processor config gives the image frame."),
    ] = None,
    pixel_budget: MaxPixelsOpt = None,
    min_pixels: MinPixelsOpt = None,
    resize_factor: ResizeFactorOpt = None,
    allow_exif: AllowExifOpt = False,
    benchmark_manifest: BenchmarkOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Write an ms-swift GRPO dataset: messages, images, the `solution` column the geo ORMs read.

    The image size the prompt states is the frame the processor gives the model (Qwen
    ``smart_resize``), set as `export-verl` sets it: options, else a local ``--model`` folder's
    ``preprocessor_config.json``, else the defaults.
    """
    from geosleuth.training.swift.export import SwiftExportOptions, export_swift

    def run() -> None:
        frame, frame_report = _image_frame(model, pixel_budget, min_pixels, resize_factor)
        samples = _load_samples(dataset, fmt, images)
        _check_benchmarks(samples, benchmark_manifest, strict)
        options = SwiftExportOptions(
            style=style, schemas=tuple(_tool_schemas(tools or "", tool_settings, allow_exif)), **frame
        )
        report = export_swift(samples, out, options)
        for f in report.failed:
            typer.echo(f"failed {f['sample_id']}: {f['reason']}", err=True)
        line = f"wrote {report.written} rows to {out} ({len(report.failed)} failed)"
        _wrote(
            as_json, f"{line}\n{_frame_line(frame_report)}",
            out=str(out), written=report.written, failed=report.failed, image_frame=frame_report,
        )  # fmt: skip
        if not report.written:
            raise ValueError("no sample could be exported")

    _guard(run)


@data_app.command("export-sft")
def export_sft_cmd(
    source: Annotated[Path, typer.Argument(help="Run directory or trajectories JSONL.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write.")],
    fmt: Annotated[str, typer.Option("--to", help="Record layout: trl | llamafactory | swift.")] = "trl",
    old_fmt: Annotated[
        str | None, typer.Option("--format", hidden=True, help="Old spelling of --to.")
    ] = None,
    tool_format: Annotated[str, typer.Option(help="hermes (Qwen <tool_call>) | openai (native)")] = "hermes",
    max_km: Annotated[
        float | None, typer.Option(help="Keep only trajectories whose answer is within this distance.")
    ] = None,
    samples: Annotated[
        Path | None, typer.Option("--truth", help="Ground truth JSONL (default: RUN_DIR/samples.jsonl).")
    ] = None,
    allow_exif: AllowExifOpt = False,
    benchmark_manifest: BenchmarkOpt = None,
    strict: StrictOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Trajectories -> chat SFT records, loss on assistant turns only, in sample-id order (the
    same file however a concurrent run finished); trajectories that offer or call exif_gps are
    skipped unless --allow-exif."""
    from geosleuth.training.data.filtering import SortedTrajectories, read_samples, truth_of
    from geosleuth.training.data.sft import export_sft

    flag, fmt = ("--format", old_fmt) if old_fmt else ("--to", fmt)
    if fmt not in ("trl", "llamafactory", "swift"):
        raise _fail(f"unknown {flag} {fmt!r}; use trl, llamafactory or swift")
    if tool_format not in ("hermes", "openai"):
        raise _fail(f"unknown --tool-format {tool_format!r}; use hermes or openai")

    def run() -> None:
        path = source / "trajectories.jsonl" if source.is_dir() else source
        records = SortedTrajectories(path)  # one record in memory at a time, in sample-id order
        unreadable: list[dict[str, str]] = []

        def readable() -> Iterator[Any]:
            for record in records:
                if isinstance(record, dict):
                    unreadable.append(record)
                    typer.echo(f"skipped {record['sample_id']}: {record['reason']}", err=True)
                else:
                    yield record

        run_filter = None
        truth_file = samples or (source / "samples.jsonl" if source.is_dir() else None)
        if benchmark_manifest:
            if truth_file is None:
                raise ValueError(
                    "--benchmark-manifest reads the trajectories' images from --truth SAMPLES.jsonl"
                )
            ids = set(records.ids)
            kept = [s for i, s in read_samples(truth_file).items() if i in ids]
            _check_benchmarks(kept, benchmark_manifest, strict)
        if max_km is not None:
            trajs = (r for r in records if not isinstance(r, dict))  # the export's pass reports the rest
            run_filter = _within(trajs, read_samples(truth_file), max_km, truth_of)
        report = export_sft(
            readable(),
            out,
            fmt,  # type: ignore[arg-type]
            tool_format,  # type: ignore[arg-type]
            base_dir=path.parent,
            run_filter=run_filter,
            allow_exif=allow_exif,
        )
        skipped = [*unreadable, *report.skipped]  # the lines it could not read count too
        _wrote(
            as_json, f"wrote {report.written} records to {out} ({len(skipped)} skipped)",
            out=str(out), written=report.written, skipped=skipped,
        )  # fmt: skip

    _guard(run)


def _within(
    trajs: Iterable[Any], samples: dict[str, Any], max_km: float, truth_of: Callable[..., Any]
) -> Callable[[Any, Any], str | None]:
    """A run filter keeping answers within ``max_km``; every record must have a ground truth
    (checked in a pass of its own, before anything is written).

    Each run is judged on its own prediction: with ``--samples N`` the aggregate can be right
    while some of the N samples (each exported as its own record) are far off.
    """
    from geosleuth.core.geo import haversine_km

    for t in trajs:
        if truth_of(t, samples) is None:
            raise ValueError(f"--max-km needs ground truth; none for sample {t.sample_id}")

    def check(record: Any, run: Any) -> str | None:
        p = run.prediction
        if p is None or not p.has_coords:
            return "no coordinates to compare with --max-km"
        d = float(haversine_km(p.lat, p.lon, *truth_of(record, samples)))
        return None if d <= max_km else f"answer {d:.1f} km from the truth (--max-km {max_km:g})"

    return check


@data_app.command("filter")
def filter_cmd(
    run_dir: Annotated[Path, typer.Argument(help="An eval run with K samples per image.")],
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output folder (default RUN_DIR/filter).")
    ] = None,
    samples: Annotated[
        Path | None, typer.Option("--truth", help="Ground truth JSONL (default RUN_DIR/samples.jsonl).")
    ] = None,
    phases: Annotated[
        str,
        typer.Option(
            help="Curriculum phases: km regimes per phase, ';' between phases; "
            "each phase adds to the earlier ones."
        ),
    ] = "1,25;200,750",
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Keep images with 0 < pass@K < K at a regime; write SpotAgent's cumulative phases (phase<i>.jsonl)."""
    del as_json  # the output is JSON either way
    from geosleuth.training.data.filtering import (
        SortedTrajectories,
        filter_trajectories,
        parse_phases,
        read_samples,
        write_filter_outputs,
    )

    def run() -> None:
        traj_path = run_dir / "trajectories.jsonl"
        if not traj_path.exists():
            raise ValueError(f"{run_dir}: no trajectories.jsonl (is this an eval run directory?)")
        truth_path = samples or run_dir / "samples.jsonl"
        truth = read_samples(truth_path if truth_path.exists() else None)
        result = filter_trajectories(SortedTrajectories(traj_path), truth, parse_phases(phases))
        report = write_filter_outputs(result, out or run_dir / "filter", truth)
        typer.echo(
            json.dumps({k: report[k] for k in ("images", "kept", "dropped", "phases", "regimes")}, indent=2)
        )

    _guard(run)


@data_app.command("sample")
def sample_cmd(
    dataset: DatasetArg,
    size: Annotated[int, typer.Option("--size", "-n", help="How many samples to draw.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Samples JSONL to write.")],
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same subset).")] = 0,
    road_csv: Annotated[
        Path | None, typer.Option(help="CSV with columns country,road_km (else a population/area proxy).")
    ] = None,
    method: Annotated[
        str, typer.Option(help="stratified (GeoAgent) | uniform (SpotAgent's random-sampling baseline).")
    ] = "stratified",
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Stratified subset: country quotas (road 0.5 / pop. 0.2 / area 0.3), then 1° cells by log
    population; or (--method uniform) a uniform random draw."""
    del as_json  # the output is JSON either way
    from geosleuth.training.data.sampling import read_road_csv, stratified_sample, uniform_sample

    def run() -> None:
        if method not in ("stratified", "uniform"):
            raise ValueError(f"--method must be stratified or uniform, got {method!r}")
        rows = _load_samples(dataset, fmt, images)
        if method == "uniform":
            chosen = uniform_sample(rows, size, seed)
            _write_samples(out, chosen)
            typer.echo(json.dumps({"written": len(chosen), "failed": 0, "method": "uniform"}))
            return
        result = stratified_sample(
            rows,
            size,
            seed,
            cells=_gazetteer_cells(),
            road_km=read_road_csv(road_csv) if road_csv else None,
            country_of=_country_of,
        )
        _write_samples(out, result.chosen)
        quotas = {c: q for c, q in sorted(result.quotas.items(), key=lambda kv: -kv[1]) if q}
        typer.echo(
            json.dumps({"written": len(result.chosen), "failed": len(result.failed), "quotas": quotas})
        )

    _guard(run)


def _gazetteer_cells() -> dict[tuple[int, int], float]:
    import numpy as np

    from geosleuth.training.data.sampling import cell_population

    try:
        from geosleuth.gazetteer import get_gazetteer
    except ImportError:
        raise ValueError("the gazetteer is unavailable: cell populations cannot be computed") from None

    places = get_gazetteer().all_places()
    return cell_population(
        np.asarray(places["lat"], float),
        np.asarray(places["lon"], float),
        np.asarray(places["population"], float),
    )


def _with_countries(samples: list[Any]) -> list[Any]:
    """Samples with coordinates on land but no country label get the country whose border
    holds them (a point at sea gets none: a nearest-country guess is no answer to test on)."""
    from geosleuth.gazetteer import get_gazetteer

    todo = [i for i, s in enumerate(samples) if not s.labels.get("country") and s.lat is not None]
    found = get_gazetteer().reverse_batch([samples[i].lat for i in todo], [samples[i].lon for i in todo])
    out = list(samples)
    for i, code, on_land in zip(todo, found["country_code"], found["on_land"], strict=True):
        if code and on_land:
            out[i] = samples[i].model_copy(update={"labels": {**samples[i].labels, "country": str(code)}})
    return out


def _country_of(samples: Any) -> list[str | None]:
    """Label first, else the gazetteer's reverse geocoding of the coordinates."""
    from geosleuth.core.countries import resolve_country

    codes = [resolve_country(s.labels["country"]) if s.labels.get("country") else None for s in samples]
    missing = [i for i, c in enumerate(codes) if c is None]
    if missing:
        try:
            from geosleuth.gazetteer import get_gazetteer
        except ImportError:
            raise ValueError(
                f"{len(missing)} samples have no country label and the gazetteer is unavailable"
            ) from None
        rev = get_gazetteer().reverse_batch(
            [samples[i].lat for i in missing], [samples[i].lon for i in missing]
        )
        for i, code in zip(missing, rev["country_code"], strict=True):
            codes[i] = str(code) if code else None
    return codes


@data_app.command("build-mcq")
def build_mcq_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Samples JSONL to write (answer_type=choice).")],
    seed: Annotated[int, typer.Option(help="Shuffling seed.")] = 0,
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """4-way country questions; distractors from neighbours / the UN sub-region, then wider regions."""
    from geosleuth.training.data.mcq import build_mcq

    def run() -> None:
        samples = _load_samples(dataset, fmt, images)
        if any(not s.labels.get("country") and s.lat is not None for s in samples):
            samples = _with_countries(samples)
        questions, failed = build_mcq(samples, seed)
        for f in failed[:20]:
            typer.echo(f"skipped {f['sample_id']}: {f['reason']}", err=True)
        _write_samples(out, questions)
        _wrote(
            as_json, f"wrote {len(questions)} questions to {out} ({len(failed)} skipped)",
            out=str(out), written=len(questions), skipped=failed,
        )  # fmt: skip

    _guard(run)


@data_app.command("verl-tool-config")
def verl_tool_config_cmd(
    out: Annotated[Path, typer.Option("--out", "-o", help="YAML file to write.")],
    tools: Annotated[
        str | None, typer.Option(help="Comma-separated tool names (default: the style's).")
    ] = None,
    style: Annotated[
        str, typer.Option("--prompt", "--style", help="Prompt style whose tools are the default.")
    ] = "spotagent",
    tool_settings: Annotated[
        Path | None, typer.Option(help="Tool settings file the tools will load.")
    ] = None,
    max_text_chars: Annotated[int, typer.Option(help="Truncate tool text here, with a notice.")] = 4000,
    bbox_convention: Annotated[str | None, typer.Option(help="absolute | relative1000")] = None,
    tool_timeout: Annotated[
        float | None,
        typer.Option(min=0.1, help="Seconds a call may take; a slower one returns an error (default 60)."),
    ] = None,
    allow_exif: AllowExifOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """verl tool-config YAML (multi_turn.tool_config_path) for geosleuth tools."""
    from geosleuth.agent.prompting import load_style
    from geosleuth.training.verl.tool_config import dump_tool_config, tool_config

    def run() -> None:
        names = tools if tools is not None else ",".join(load_style(style).tools)
        schemas = _tool_schemas(names, tool_settings, allow_exif)
        if not schemas:
            raise ValueError("no tools selected")
        settings = tool_settings.resolve() if tool_settings else None
        doc = tool_config(
            schemas, settings, max_text_chars, bbox_convention=bbox_convention, timeout_s=tool_timeout
        )
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dump_tool_config(doc), encoding="utf-8")
        _wrote(
            as_json, f"wrote {len(schemas)} tools to {out}",
            out=str(out), tools=[t["function"]["name"] for t in schemas],
        )  # fmt: skip

    _guard(run)


@data_app.command("visual-qa")
def visual_qa_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Visual QA records JSONL to write.")],
    fraction: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of the dataset drawn at random (SpotAgent: 0.05).")
    ] = 0.05,
    seed: Annotated[int, typer.Option(help="Random seed (same seed, same subset).")] = 0,
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """SpotAgent's stage-1 records: a random fraction of a dataset as image -> country, city and
    coordinates in its <answer> lines (messages + images, as ms-swift and TRL read them)."""
    del as_json  # the output is JSON either way
    from geosleuth.training.data.paper_data import visual_qa_records

    def run() -> None:
        records, failed = visual_qa_records(_load_samples(dataset, fmt, images), fraction, seed)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
        typer.echo(json.dumps({"written": len(records), "failed": len(failed), "fraction": fraction}))

    _guard(run)


@data_app.command("difficulty")
def difficulty_cmd(
    run_dirs: Annotated[list[Path], typer.Argument(help="Eval runs of different models on the same images.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Labels JSONL to write (sample_id, difficulty).")],
    km: Annotated[float, typer.Option(min=0.0, help="Distance a run must be within.")] = 10.0,
    min_runs: Annotated[int, typer.Option(min=1, help="Runs that must be within --km for easy.")] = 2,
    truth: Annotated[
        Path | None,
        typer.Option("--truth", help="Ground truth JSONL (default: the first run's samples.jsonl)."),
    ] = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Thinking with Map's difficulty: easy when at least two runs are within 10 km, else hard."""
    del as_json  # the output is JSON either way
    from geosleuth.core.geo import haversine_km
    from geosleuth.training.data.filtering import read_samples, read_trajectory_records
    from geosleuth.training.data.paper_data import difficulty_labels

    def run() -> None:
        if len(run_dirs) < min_runs:
            raise ValueError(f"{len(run_dirs)} run(s) can never make {min_runs} agree: give more runs")
        samples = read_samples(truth or run_dirs[0] / "samples.jsonl")
        if not samples:
            raise ValueError("no ground truth: give --truth or runs with samples.jsonl")
        distances: dict[str, list[float]] = {sid: [] for sid, s in samples.items() if s.lat is not None}
        for sid in sorted(set(samples) - set(distances)):
            typer.echo(f"failed {sid}: no true coordinates to measure the runs against", err=True)
        for run_dir in run_dirs:
            path = run_dir / "trajectories.jsonl"
            if not path.exists():
                raise ValueError(f"{run_dir}: no trajectories.jsonl (is this an eval run directory?)")
            answered = {r.sample_id: r for r in read_trajectory_records(path) if not isinstance(r, dict)}
            for sid, ds in distances.items():
                p = answered[sid].prediction if sid in answered else None
                s = samples[sid]
                ok = p is not None and p.has_coords
                ds.append(float(haversine_km(p.lat, p.lon, s.lat, s.lon)) if ok else float("nan"))
        labels = difficulty_labels(distances, km, min_runs)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("".join(json.dumps({"sample_id": k, **v}) + "\n" for k, v in labels.items()), "utf-8")
        easy = sum(v["difficulty"] == "easy" for v in labels.values())
        no_truth = len(samples) - len(distances)
        typer.echo(
            json.dumps({"written": len(labels), "easy": easy, "hard": len(labels) - easy, "failed": no_truth})
        )

    _guard(run)


JudgeModelOpt = Annotated[
    str, typer.Option("--judge-model", help="OpenAI-compatible vision model that judges.")
]
JudgeUrlOpt = Annotated[
    str | None, typer.Option("--judge-base-url", help="Its endpoint (default $OPENAI_BASE_URL).")
]
JudgeKeyOpt = Annotated[str, typer.Option("--judge-api-key-env", help="Variable holding the judge's key.")]


def _judged(
    task: str, dataset: Path, out: Path, fmt: str, images: Path | None, judge: tuple[str, str | None, str],
    concurrency: int, **options: Any,
) -> None:  # fmt: skip
    """Run an image judge over a dataset; write the kept samples and a report of every image."""
    import asyncio

    from geosleuth.agent.client import ChatClient
    from geosleuth.training.data.image_judges import judge_images

    rows = _load_samples(dataset, fmt, images)
    model, base_url, key_env = judge

    async def go() -> list[Any]:
        client = ChatClient(model, base_url, api_key_env=key_env, max_retries=1, backoff_s=0.05)
        try:
            return await judge_images(client, rows, task, concurrency, **options)
        finally:
            await client.aclose()

    results = asyncio.run(go())
    kept = [
        r.sample.model_copy(update={"metadata": {**r.sample.metadata, **r.values}}) for r in results if r.kept
    ]
    _write_samples(out, kept)
    report = out.with_suffix(".report.jsonl")
    report.write_text(
        "".join(
            json.dumps(
                {"sample_id": r.sample.id, "kept": r.kept, "reason": r.reason, "error": r.error, **r.values}
            )
            + "\n"
            for r in results
        ),
        encoding="utf-8",
    )
    reasons: dict[str, int] = {}
    for r in results:
        if r.reason:
            reasons[r.reason.split(" (")[0]] = reasons.get(r.reason.split(" (")[0], 0) + 1
    failed = [r for r in results if r.error]
    for r in failed[:5]:
        typer.echo(f"failed {r.sample.id}: {r.error}", err=True)
    typer.echo(
        json.dumps({"kept": len(kept), "dropped": reasons, "failed": len(failed), "report": str(report)})
    )


@data_app.command("geovista-filter")
def geovista_filter_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Kept samples JSONL (a .report.jsonl beside it).")],
    judge_model: JudgeModelOpt,
    judge_base_url: JudgeUrlOpt = None,
    judge_api_key_env: JudgeKeyOpt = "OPENAI_API_KEY",
    min_pixels: Annotated[int, typer.Option(min=1, help="Smallest image kept, in pixels.")] = 1_000_000,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge requests at once.")] = 8,
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """GeoVista's data filters: images of at least 1 M pixels that a judge finds localizable and
    not an easily localizable landmark."""
    del as_json  # the output is JSON either way
    judge = (judge_model, judge_base_url, judge_api_key_env)
    _guard(
        lambda: _judged(
            "geovista_filter", dataset, out, fmt, images, judge, concurrency, min_pixels=min_pixels
        )
    )


@data_app.command("locatability")
def locatability_cmd(
    dataset: DatasetArg,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Scored samples JSONL (a .report.jsonl beside it).")
    ],
    judge_model: JudgeModelOpt,
    judge_base_url: JudgeUrlOpt = None,
    judge_api_key_env: JudgeKeyOpt = "OPENAI_API_KEY",
    min_score: Annotated[
        float | None, typer.Option(min=0.0, max=10.0, help="Keep images scored at least this (default: all).")
    ] = None,
    concurrency: Annotated[int, typer.Option(min=1, help="Judge requests at once.")] = 8,
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """GeoAgent's locatability: a judge scores each image 0-10 (metadata.locatability)."""
    del as_json  # the output is JSON either way
    judge = (judge_model, judge_base_url, judge_api_key_env)
    _guard(
        lambda: _judged("locatability", dataset, out, fmt, images, judge, concurrency, min_score=min_score)
    )


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.add_typer(data_app, name="data")


def _registry(tool_settings: Path | None, registry_factory: str | None) -> Any:
    from geosleuth.training.verl.tools import shared_registry

    try:
        return shared_registry(str(tool_settings) if tool_settings else None, registry_factory)
    except ImportError as exc:
        raise ValueError(f"tools are not available: {exc}") from None


@data_app.command("synthesize")
def synthesize_cmd(
    dataset: DatasetArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output folder (resumable).")],
    observer_model: Annotated[
        str,
        typer.Option(
            "--observer",
            "--observer-model",
            help="Who sees the image: a vision model (name) or 'offline' (the offline clue pipeline: "
            "OCR text with positions, languages, phone numbers, domains, candidate places). Pixels "
            "only: the file's metadata never reaches a trajectory.",
        ),
    ],
    planner_model: Annotated[str, typer.Option(help="Planner LLM (calls tools, concludes).")],
    observer_url: Annotated[
        str | None,
        typer.Option(
            "--observer-base-url", "--observer-url", help="OpenAI-compatible base URL of the observer."
        ),
    ] = None,
    planner_url: Annotated[
        str | None,
        typer.Option(
            "--planner-base-url", "--planner-url", help="OpenAI-compatible base URL of the planner."
        ),
    ] = None,
    tools: Annotated[
        str, typer.Option(help="Comma-separated tool names.")
    ] = "image_zoom_in_tool,search_web,maps_geocode",
    delta_km: Annotated[
        float, typer.Option(help="Keep trajectories whose answer is within this distance.")
    ] = 5.0,
    max_steps: Annotated[int, typer.Option(help="Planner steps before giving up.")] = 6,
    max_tokens: Annotated[int, typer.Option(min=16, help="Token limit per observer / planner reply.")] = 1024,
    concurrency: Annotated[int, typer.Option(help="Samples in flight.")] = 4,
    limit: Annotated[int | None, typer.Option(help="Only the first N samples.")] = None,
    tool_settings: Annotated[Path | None, typer.Option(help="Tool settings file (providers, cache).")] = None,
    registry_factory: Annotated[
        str | None, typer.Option(help="module:function(settings_path) -> ToolRegistry, for custom tools.")
    ] = None,
    planner_tool_calling: Annotated[
        str,
        typer.Option(
            help="native: the server's tool calls; text: JSON calls written in the reply, tools and a "
            "worked example in the prompt (small local models; training/prompts/planner.yaml).",
        ),
    ] = "native",
    planner_constrained: Annotated[
        bool,
        typer.Option(
            help="Text mode: send llama.cpp's JSON-schema response_format so a reply can only be a tool "
            "call or the answer (a call until --min-tool-calls are made)."
        ),
    ] = False,
    min_tool_calls: Annotated[
        int, typer.Option(min=0, help="Reject trajectories answered with fewer valid tool calls.")
    ] = 1,
    temperature: Annotated[float, typer.Option(min=0.0, help="Planner sampling temperature.")] = 0.7,
    geocode_answers: Annotated[
        bool,
        typer.Option(
            help="An answer naming a place without coordinates gets the offline gazetteer's (like locate); "
            "text mode then asks the planner for the place only. The 5 km check is unchanged."
        ),
    ] = False,
    fmt: FormatOpt = "auto",
    images: ImagesOpt = None,
    benchmark_manifest: BenchmarkOpt = None,
    strict: StrictOpt = False,
    as_json: AlwaysJsonOpt = False,
) -> None:
    """Cold-start trajectories: observer VLM + planner LLM + real tools, kept only if verified."""
    del as_json  # the output is JSON either way
    import asyncio

    from geosleuth.agent.client import ChatClient
    from geosleuth.training.data.synthesis import SynthesisConfig, Synthesizer

    async def go(samples: list[Any], registry: Any) -> dict[str, Any]:
        config = SynthesisConfig(
            tools=tuple(t.strip() for t in tools.split(",") if t.strip()),
            max_steps=max_steps,
            delta_km=delta_km,
            concurrency=concurrency,
            max_tokens=max_tokens,
            tool_calling=planner_tool_calling,
            constrained=planner_constrained,
            min_tool_calls=min_tool_calls,
            temperature=temperature,
            geocode_answers=geocode_answers,
        )
        from geosleuth.agent.observer import OfflineObserver

        async with ChatClient(planner_model, planner_url) as planner:
            if observer_model.strip().lower() == "offline":
                seer = OfflineObserver(metadata=False)
                return await Synthesizer(config, registry, seer, planner, out).run(samples)
            async with ChatClient(observer_model, observer_url) as observer:
                return await Synthesizer(config, registry, observer, planner, out).run(samples)

    def run() -> None:
        if planner_tool_calling not in ("native", "text"):
            raise ValueError(f"--planner-tool-calling must be native or text, not {planner_tool_calling!r}")
        if planner_constrained and planner_tool_calling != "text":
            raise ValueError("--planner-constrained needs --planner-tool-calling text")
        samples = _load_samples(dataset, fmt, images)[:limit]
        _check_benchmarks(samples, benchmark_manifest, strict)
        report = asyncio.run(go(samples, _registry(tool_settings, registry_factory)))
        typer.echo(json.dumps(report, indent=2))

    _guard(run)
