"""CLI: ``geosleuth locate IMAGE…`` — locate photos with a VLM agent, or offline from their clues."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

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

if TYPE_CHECKING:
    from rich.console import Console

    from geosleuth.core.records import Trajectory

FAILED = ("input_error", "model_error", "timeout")
FULL_STEPS = {"ocr": 20, "clues": 12, "phone_area": 6, "place_names": 8, "postcodes": 6, "candidates": 10}
"""Offline steps whose result the trace shows beyond its first line (OCR text, each candidate and
what became of it), and how many lines at most."""
MAX_RESULT_CHARS = 8000  # of one tool result in --json (the trajectory file keeps it whole)
MAX_RESULT_LINES = 60
EVIDENCE_LINES = 10  # per tool, in a failed image's evidence
COORDS_SOURCES = {
    "geocoded": "geocoding",
    "exif": "EXIF GPS",
    "model": "the model",
    "aggregate": "the samples",
}


def register(app: typer.Typer) -> None:
    """Attach this module's commands to the main app."""
    app.command("locate")(locate)


def locate(
    images: Annotated[
        list[Path], typer.Argument(help="Image files (JPEG, PNG, WebP, …).", show_default=False)
    ],
    model: ModelOpt = None,
    base_url: BaseUrlOpt = None,
    api_key_env: ApiKeyEnvOpt = "OPENAI_API_KEY",
    tools: ToolsOpt = None,
    prompt: PromptOpt = "geovista",
    samples: SamplesOpt = 1,
    verifier: VerifierOpt = None,
    verifier_view: VerifierViewOpt = None,
    max_turns: MaxTurnsOpt = None,
    temperature: TemperatureOpt = None,
    tool_calling: ToolCallingOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write trajectories.jsonl and tool images here.")
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            min=1,
            help="Images processed at once, at most: fewer while large images' decoded sizes "
            "(4 bytes a pixel + 64 MiB each) would pass half the memory available at start.",
        ),
    ] = 8,
    no_ocr: Annotated[bool, typer.Option("--no-ocr", help="Offline pipeline: use EXIF only.")] = False,
    geocode: Annotated[
        bool,
        typer.Option(
            "--geocode/--no-geocode", help="Geocode answers that name a place but give no coordinates."
        ),
    ] = True,
    resize_factor: ResizeFactorOpt = 0,
    observer: ObserverOpt = None,
    observer_base_url: ObserverUrlOpt = None,
    provider: ProviderOpt = "auto",
    reasoning_effort: ReasoningEffortOpt = None,
    max_tokens: MaxTokensOpt = None,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            min=0.001,
            help="Seconds per image for the model's turns and tools (default 600); each request "
            "to the model also ends after 120 s in total, or --timeout if shorter.",
        ),
    ] = None,
) -> None:
    """Locate IMAGE(s): answer, address, confidence, evidence and a short trace per image."""
    from pydantic import ValidationError

    from geosleuth.api.locate import agent_config

    try:
        config = agent_config(
            model,
            base_url=base_url,
            api_key_env=api_key_env,
            prompt=prompt,
            tools=tools,
            samples=samples,
            verifier=verifier,
            verifier_view=verifier_view,
            max_turns=max_turns,
            temperature=temperature,
            tool_calling=tool_calling,
            no_ocr=no_ocr,
            geocode=geocode,
            resize_factor=resize_factor,
            observer=observer,
            observer_base_url=observer_base_url,
            provider=provider,
            reasoning_effort=reasoning_effort,
            max_tokens=max_tokens,
            timeout=timeout,
        )
    except (ValidationError, ValueError) as exc:
        typer.echo(f"error: {_first_error(exc)}", err=True)
        raise typer.Exit(2) from None
    if model is not None and not model.startswith(("http://", "https://")):  # a URL is the endpoint
        _note_default_endpoint(base_url, api_key_env)
    try:
        trajectories = _run(images, config, out, concurrency)
    except (KeyError, ValueError, ImportError, OSError) as exc:
        typer.echo(f"error: {exc.args[0] if isinstance(exc, KeyError) and exc.args else exc}", err=True)
        raise typer.Exit(2) from None
    if out is not None:
        from geosleuth.agent import write_trajectories

        write_trajectories(out / "trajectories.jsonl", trajectories, append=False)
    if as_json:
        from geosleuth.secrets import redact_text

        rows = [summary(p, t) for p, t in zip(images, trajectories, strict=True)]
        typer.echo(redact_text(json.dumps(rows, ensure_ascii=False, indent=2)))
    else:
        _print(images, trajectories, out)
    if trajectories and all(t.status in FAILED for t in trajectories):
        raise typer.Exit(1)


def _note_default_endpoint(base_url: str | None, api_key_env: str) -> None:
    """Say so when a model is asked of the built-in default endpoint (a local server was meant?)."""
    import os

    from geosleuth.agent.client import DEFAULT_BASE_URL

    if not base_url and not os.environ.get("OPENAI_BASE_URL"):
        typer.echo(
            f"note: no --base-url or OPENAI_BASE_URL: using {DEFAULT_BASE_URL} (key: ${api_key_env})",
            err=True,
        )


def _first_error(exc: Exception) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        e = errors()[0]
        where = ".".join(str(x) for x in e.get("loc", ()))
        msg = str(e["msg"]).removeprefix("Value error, ")
        return f"{where}: {msg}" if where else msg
    return str(exc)


def _run(images: list[Path], config: Any, out: Path | None, concurrency: int) -> list[Trajectory]:
    import asyncio

    from geosleuth.agent import run_tasks
    from geosleuth.core.records import Task
    from geosleuth.core.surrogates import clean_text

    seen: dict[str, int] = {}
    tasks = []
    for path in images:
        base = clean_text(path.stem)[0] or "image"  # a name that is not UTF-8 has lone surrogates in Python
        seen[base] = seen.get(base, 0) + 1
        tasks.append(Task(id=base if seen[base] == 1 else f"{base}-{seen[base]}", image=str(path)))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    return asyncio.run(run_tasks(tasks, config, artifacts_dir=out, concurrency=concurrency))


def summary(image: Path, t: Trajectory) -> dict[str, Any]:
    """What ``--json`` prints per image: the prediction and a compact trajectory summary.

    With ``--samples N`` the turns, tool calls and tokens are those of all N samples.
    """
    runs = [t, *t.samples]
    calls = [c for r in runs for c in r.tool_calls]
    replaced = t.metadata.get("replaced_surrogates")  # text that carried lone surrogates, cleaned
    from geosleuth.core.surrogates import clean_text

    return {
        **({"replaced_surrogates": replaced} if replaced else {}),
        "image": clean_text(str(image))[0],
        "sample_id": t.sample_id,
        "status": str(t.status),
        "error": t.error,
        "model": t.model,
        "prediction": t.prediction.model_dump(exclude={"raw"}, exclude_none=True) if t.prediction else None,
        "turns": sum(len(r.turns) for r in runs),
        "evidence": _evidence(t, calls),
        "candidates": t.metadata.get("candidates", []),
        "tool_calls": [
            {
                "name": c.name,
                "arguments": c.arguments,
                "ok": c.ok,
                "error": c.error,
                "result": _result_lines(c.result_text)[:MAX_RESULT_LINES],
                "latency_s": round(c.latency_s, 4),
            }
            for c in calls
        ],
        "tokens": sum(r.usage.total_tokens for r in runs),
        "samples": len(t.samples),
        "aggregator": t.aggregator,
        "seconds": round((t.finished_at or 0) - (t.started_at or 0), 3),
    }


def _evidence(t: Trajectory, calls: list[Any]) -> list[str]:
    """The answer's evidence; without an answer, what the run did find (each tool's result lines,
    headers left out), so a failed image's record still says what was seen."""
    if t.prediction is not None and t.prediction.evidence:
        return list(t.prediction.evidence)
    found = []
    for c in calls:
        lines = [x for x in _result_lines(c.result_text) if not x.endswith(":")] if c.ok else []
        found += [f"{c.name}: {clip(line, 300)}" for line in lines[:EVIDENCE_LINES]]
    return found


def _result_lines(text: str | None) -> list[str]:
    """A tool result's lines without the untrusted-output fence (bounded: results can be long)."""
    lines = (text or "")[:MAX_RESULT_CHARS].strip().splitlines()
    return [" ".join(line.split()) for line in lines if line.strip() and not _is_fence(line)]


def _print(images: list[Path], trajectories: list[Trajectory], out: Path | None) -> None:
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    for image, t in zip(images, trajectories, strict=True):
        _print_one(console, image, t)
    if out is not None:
        console.print(f"[dim]trajectories written to {out / 'trajectories.jsonl'}[/dim]")


def _print_one(console: Console, image: Path, t: Trajectory) -> None:
    from rich.markup import escape

    console.rule(f"[bold]{escape(str(image))}[/bold]")
    if t.status in FAILED:
        console.print(f"[red]error ({t.status}):[/red] {escape(t.error or '')}")
        return
    p = t.prediction
    if p is None or not (p.has_coords or p.country or p.city):
        console.print(f"[yellow]cannot locate[/yellow] ({t.status}): {escape(t.error or 'no usable answer')}")
    else:
        if p.has_coords:
            console.print(f"[bold green]{p.lat:.5f}, {p.lon:.5f}[/bold green]")
        place = ", ".join(
            x for x in (p.street, p.town, p.city, p.admin2, p.admin1, p.country or p.country_code) if x
        )
        if place:
            console.print(f"place: {escape(place)}")
        bits = []
        if p.confidence is not None:
            bits.append(f"confidence {p.confidence:.2f}")
        if p.radius_km is not None:
            bits.append(f"± {p.radius_km:g} km")
        if p.coords_source:
            bits.append(f"coordinates from {COORDS_SOURCES.get(p.coords_source, p.coords_source)}")
        if bits:
            console.print(", ".join(bits))
        for e in p.evidence:
            console.print(f"  • {escape(e)}")
        if t.status != "ok":
            console.print(f"[yellow]status: {t.status}[/yellow] {escape(t.error or '')}")
    _print_trace(console, t)


def _print_trace(console: Console, t: Trajectory) -> None:
    from rich.markup import escape

    if t.samples:
        console.print(f"[dim]{len(t.samples)} samples aggregated by {t.aggregator}:[/dim]")
        for i, s in enumerate(t.samples, 1):
            p = s.prediction
            where = f"{p.lat:.4f}, {p.lon:.4f}" if p is not None and p.has_coords else "no coordinates"
            console.print(f"[dim]  sample {i}: {where} ({s.status}, {len(s.turns)} turns)[/dim]")
        return
    console.print(f"[dim]trace ({t.model}, {len(t.turns)} turn(s), {t.usage.total_tokens} tokens):[/dim]")
    for turn in t.turns:
        text = " ".join(turn.text.split())
        if text:
            console.print(f"[dim]  {turn.index + 1}: {escape(clip(text, 240))}[/dim]")
        for c in turn.tool_calls:
            args = clip(json.dumps(c.arguments, ensure_ascii=False), 80)
            lines = [
                clip(" ".join(line.split()), 160)
                for line in (c.result_text or c.error or "").strip().splitlines()
                if line.strip() and not _is_fence(line)
            ]
            outcome = "ok" if c.ok else "error"
            head = f"     → {c.name}({args}) {outcome}: {lines[0] if lines else ''}"
            console.print(f"[dim]{escape(head)}[/dim]")
            shown = FULL_STEPS.get(c.name, 0)
            for line in lines[1 : 1 + shown]:
                console.print(f"[dim]{escape('         ' + line)}[/dim]")
            if shown and len(lines) > 1 + shown:
                more = len(lines) - 1 - shown
                console.print(f"[dim]         … {more} more line(s) (--out keeps them all)[/dim]")


def clip(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > limit // 2 else cut).rstrip(" ,;:") + "…"


def _is_fence(line: str) -> bool:
    """The untrusted-output markers around tool text: noise in a one-line trace."""
    from geosleuth.tools.text import OUTPUT_BEGIN, OUTPUT_END

    head = OUTPUT_BEGIN.split("{", 1)[0]
    return line.startswith(head) or line == OUTPUT_END
