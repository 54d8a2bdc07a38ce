"""`geosleuth report RUN_DIR`: summary.json, Markdown, CSV, plots and the offline HTML report."""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from geosleuth.eval.judges.tasks import judge_summary, read_judgments
from geosleuth.eval.report.fairness import add_fairness
from geosleuth.eval.report.fairness_markup import fairness_markdown
from geosleuth.eval.report.geoguessr_map import geoguessr_map_markdown, run_map_figures
from geosleuth.eval.report.grounding import ConsistencyFn, add_grounding
from geosleuth.eval.report.grounding_markup import grounding_markdown
from geosleuth.eval.report.leaks import leak_notes, leak_summary
from geosleuth.eval.report.rundata import RunData, load_records, load_run
from geosleuth.eval.report.scores import RunScore, ScoreRow, protocol_for, score_samples
from geosleuth.eval.report.summary import DEFAULT_BREAKDOWNS, percent_judges, percent_summary, summarize
from geosleuth.eval.run.config import SAMPLES, Price
from geosleuth.eval.run.store import write_atomic

__all__ = [
    "MARKDOWN",
    "PER_SAMPLE",
    "SUMMARY",
    "RunData",
    "compute",
    "load_records",
    "score",
    "load_run",
    "write_report",
]
from geosleuth.bounds.textrows import spreadsheet_safe
from geosleuth.secrets import redact_text

SUMMARY = "summary.json"
MARKDOWN = "summary.md"
PER_SAMPLE = "per_sample.csv"


def score(run: RunData, protocol: str | None = None, fields: list[str] | None = None) -> RunScore:
    """The run through the scoring engine, streaming its samples and trajectories."""
    config = run.config
    proto = protocol_for(protocol or config.get("protocol"), run.iter_samples())
    wanted = [*DEFAULT_BREAKDOWNS, *(config.get("breakdowns") or []), *(fields or [])]
    return score_samples(run.iter_samples(), run.lookup, proto, wanted, name=str(run.run_dir / SAMPLES))


def compute(
    run: RunData,
    protocol: str | None = None,
    fields: list[str] | None = None,
    consistency: tuple[str, ConsistencyFn] | None = None,
) -> tuple[dict[str, Any], list[ScoreRow]]:
    """The summary of a loaded run and its per-sample rows (views over the scored columns)."""
    summary, scored = _compute(run, protocol, fields, consistency)
    return summary, scored.rows()


def _compute(
    run: RunData,
    protocol: str | None = None,
    fields: list[str] | None = None,
    consistency: tuple[str, ConsistencyFn] | None = None,
) -> tuple[dict[str, Any], RunScore]:
    config = run.config
    scored = score(run, protocol, fields)
    prices = {k: Price.model_validate(v) for k, v in (config.get("prices") or {}).items()}
    summary = summarize(
        scored,
        fields=[*(config.get("breakdowns") or []), *(fields or [])],
        prices=prices,
        judgments=read_judgments(run.run_dir),
    )
    summary["run"] = {
        k: run.manifest.get(k)
        for k in (
            "geosleuth_version",
            "model",
            "verifier",
            "judge_model",
            "providers",
            "created_at",
            "dataset",
        )
    }
    seed = int(config.get("seed") or 0)
    add_fairness(summary, scored, seed=seed)
    truths = (
        {s.id: {"lat": s.lat, "lon": s.lon, **s.labels} for s in run.iter_samples()} if consistency else None
    )
    add_grounding(summary, run.trajectories.latest(), scored, consistency, truths)
    summary.update(leak_summary(run.manifest, scored.columns.search_results_blocked))
    summary["notes"] = [*(summary.get("notes") or []), *leak_notes(summary, run.manifest)]
    judges = judge_summary(run.run_dir)
    if judges:
        summary["judges"] = percent_judges(judges)
    if scored.protocol.name == "geoguessr-map":
        summary["geoguessr_map"] = run_map_figures(run.samples, run.records, seed)
    requested = [*(config.get("breakdowns") or []), *(fields or [])]
    summary["notes"] = [*(summary.get("notes") or []), *_missing_breakdowns(requested, summary)]
    return summary, scored


def _missing_breakdowns(requested: list[str], summary: dict[str, Any]) -> list[str]:
    """A note per ``--breakdown`` field no sample carries: named, never dropped in silence."""
    present = sorted(summary.get("breakdowns", {}))
    return [
        f"--breakdown {name}: no sample has a value for {name!r}, so there is no breakdown by it "
        f"(breakdowns the run has: {', '.join(present) or 'none'})"
        for name in dict.fromkeys(requested)
        if name not in summary.get("breakdowns", {})
    ]


def _fmt(value: Any, scale: float = 1.0) -> str:
    """A table cell; ``scale`` 100 turns a stored fraction (tool rates) into percent."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{scale * value:.2f}"
    return str(value)


def _metric_cell(metric: Any) -> str:
    if isinstance(metric, dict):
        lo, hi = metric.get("ci95", [None, None])
        return f"{_fmt(metric['value'])} [{_fmt(lo)}, {_fmt(hi)}]"
    return _fmt(metric)


def _percent_name(name: str) -> bool:
    return "acc" in name or name.startswith(("pass@", "best@"))


def markdown(summary: dict[str, Any]) -> str:
    """A human-readable summary: headline metrics with 95 % CIs, statuses, tools, breakdowns.

    Accuracies are percentages (a summary stored before that convention is converted first).
    """
    summary = percent_summary(summary)
    run = summary.get("run", {})
    lines = [
        f"# Evaluation: {run.get('model')}",
        "",
        f"{summary['n_finished']} / {summary['n_samples']} samples finished, "
        f"{summary['n_failed']} failed or missing "
        f"(counted wrong); protocol `{summary['protocol']['name']}`.",
        "",
        "| metric | value [95 % CI] |",
        "|---|---|",
    ]
    for name, metric in summary["metrics"].items():
        unit = " (%)" if _percent_name(name) else ""
        lines.append(f"| {name}{unit} | {_metric_cell(metric)} |")
    for name, metric in summary.get("coordinate_levels", {}).items():
        if isinstance(metric, dict):
            lines.append(f"| {name} (%, reverse-geocoded) | {_metric_cell(metric)} |")
        else:
            lines += ["", f"Coordinate levels: {metric}."]
    lines += [f"\nNote: {note}." for note in summary.get("notes") or ()]
    for judge, values in summary.get("judges", {}).items():
        shown = ", ".join(f"{k} {_fmt(v)}" for k, v in values.items())
        lines += ["", f"Judge `{judge}`: {shown} (accuracies and scores in %)."]
    lines += wherebench_markdown(summary.get("wherebench"))
    lines += geoguessr_map_markdown(summary.get("geoguessr_map"))
    lines += ["", "| status | samples |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary["status_counts"].items()]
    tools = summary["tools"]
    lines += ["", "## Tool use", ""]
    if tools["per_tool"]:
        lines += [
            "| tool | calls | per sample | success % | cache hit % | mean latency s |",
            "|---|---|---|---|---|---|",
        ]
    else:
        lines.append("No tool was called.")
    for name, t in tools["per_tool"].items():
        lines.append(
            f"| {name} | {t['calls']} | {_fmt(t['calls_per_sample'])} | {_fmt(t['success_rate'], 100)} | "
            f"{_fmt(t['cache_hit_rate'], 100)} | {_fmt(t['mean_latency_s'])} |"
        )
    lines += [
        "",
        f"Turns per sample {_fmt(tools['turns_per_sample'])}, tokens per sample "
        f"{_fmt(tools['prompt_tokens_per_sample'])} prompt + {_fmt(tools['completion_tokens_per_sample'])} "
        f"completion, latency p50 {_fmt(tools['latency_s']['p50'])} s, cost {_fmt(tools['cost_usd'])} USD.",
    ]
    multi = summary.get("multi_sample") or {}
    if multi:
        lines += [
            "",
            f"## N = {multi['n']} samples per image (%)",
            "",
            "| threshold | pass@k | Best@N | Range@N | aggregated |",
            "|---|---|---|---|---|",
        ]
        for name, by_k in multi["pass@k"].items():
            passes = ", ".join(f"@{k} {_fmt(v)}" for k, v in by_k.items())
            spread = _fmt(multi.get("range@n", {}).get(name))
            lines.append(
                f"| {name} | {passes} | {_fmt(multi['best@n'][name])} | {spread} | "
                f"{_fmt(multi['aggregated'][name])} |"
            )
    for field, groups in summary["breakdowns"].items():
        keys = list(dict.fromkeys(k for g in groups.values() for k in g if k not in ("n", "ci95")))
        lines += [
            "",
            f"## By {field} (accuracies in %)",
            "",
            "| " + " | ".join([field, "n", *keys]) + " |",
            "|" + "---|" * (len(keys) + 2),
        ]
        for value, group in groups.items():
            ci95 = group.get("ci95") or {}  # groupings of the truth carry each accuracy's interval
            cells = [
                _metric_cell({"value": group.get(k), "ci95": ci95[k]}) if k in ci95 else _fmt(group.get(k))
                for k in keys
            ]
            lines.append("| " + " | ".join([value, str(group["n"]), *cells]) + " |")
    lines += fairness_markdown(summary.get("fairness"))
    lines += grounding_markdown(summary.get("grounding"))
    return "\n".join(lines) + "\n"


def wherebench_markdown(block: dict[str, Any] | None) -> list[str]:
    """The WhereBench section: WhereCountry both ways, WhereStreet per split, thinking, Overall (all %)."""
    if not block:
        return []
    lines = ["", "## WhereBench (%)", ""]
    country = block.get("wherecountry")
    if country:
        lines += [
            "| WhereCountry | n | parsed | accuracy as published (over parsed) | accuracy every row |",
            "|---|---|---|---|---|",
            f"| | {country['n']} | {country['parsed']} | {_fmt(country['accuracy_as_published'])} | "
            f"{_fmt(country['accuracy_every_row'])} |",
        ]
        if country["unparsed_ids"]:
            shown = ", ".join(country["unparsed_ids"][:50])
            more = (
                f" … and {len(country['unparsed_ids']) - 50} more"
                if len(country["unparsed_ids"]) > 50
                else ""
            )
            lines += [
                "",
                f"Rows that differ (unparsed: dropped as published, wrong every row): {shown}{more}.",
            ]
    street = block.get("wherestreet") or {}
    if street:
        acc = [k for k in next(iter(street.values())) if k.startswith("acc@")]
        lines += [
            "",
            "| WhereStreet split | text n | path score | coord n | "
            + " | ".join(acc)
            + " | thinking (text) | Shapley thinking (text) | thinking (coord) | Shapley thinking (coord) |",
            "|" + "---|" * (8 + len(acc)),
        ]
        for split, f in street.items():
            tt, tc = f["thinking_text"], f["thinking_coordinates"]
            lines.append(
                f"| {split} | {f['n_text']} | {_fmt(f['path_score'])} | {f['n_coordinates']} | "
                + " | ".join(_fmt(f[k]) for k in acc)
                + f" | {_fmt(tt['thinking'])} | {_fmt(tt['thinking_shapley'])} | {_fmt(tc['thinking'])} | "
                f"{_fmt(tc['thinking_shapley'])} |"
            )
        judged = {s: f["path_score_judge"] for s, f in street.items() if "path_score_judge" in f}
        if judged:
            lines += [
                "",
                "Judged path score: " + ", ".join(f"{s} {_fmt(v)}" for s, v in judged.items()) + ".",
            ]
    lines += [
        "",
        f"Overall (as released): {_fmt(block.get('overall'))} (WhereCountry as published); "
        f"{_fmt(block.get('overall_every_row'))} (every row); Eq. 2 with Acc@1 km: "
        f"{_fmt(block.get('overall_eq2'))}.",
    ]
    return lines


CSV_COLUMNS = (
    "sample_id",
    "status",
    "answer_type",
    "true_lat",
    "true_lon",
    "pred_lat",
    "pred_lon",
    "distance_km",
    "country_code",
    "continent",
    "path_score",
    "confidence",
    "turns",
    "tool_calls",
    "tool_errors",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
)


def per_sample_csv(rows: Sequence[ScoreRow], handle: TextIO) -> None:
    """One line per sample: the run's columns, then each of the protocol's per-row hits (empty
    where the figure is not defined on the sample)."""
    writer = csv.writer(handle)
    hit_names = list(rows[0].hits()) if rows else []
    writer.writerow([*CSV_COLUMNS, *hit_names])
    for row in rows:
        values = [getattr(row, c, None) for c in CSV_COLUMNS]
        values = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
        hits = row.hits()
        writer.writerow(
            [spreadsheet_safe(v) for v in [*values, *("" if hits[h] is None else hits[h] for h in hit_names)]]
        )


def write_report(
    run_dir: Path,
    protocol: str | None = None,
    fields: list[str] | None = None,
    html: bool = True,
    plots: bool = True,
    consistency: tuple[str, ConsistencyFn] | None = None,
) -> dict[str, Any]:
    """Compute and write every report file; returns the summary. ``consistency`` (judge name,
    scorer) adds GeoAgent's R_con to the grounding figures."""
    run = load_run(run_dir)
    summary, scored = _compute(run, protocol, fields, consistency)
    rows = scored.rows()
    outputs: dict[str, Any] = {"summary": SUMMARY, "markdown": MARKDOWN, "csv": PER_SAMPLE}
    pngs: list[Path] = []
    if plots:
        from geosleuth.eval.report.plots import write_plots

        outputs["plots"] = write_plots(run_dir / "plots", rows, summary)
        if isinstance(outputs["plots"], list):
            pngs = [run_dir / "plots" / name for name in outputs["plots"]]
    if html:
        from geosleuth.eval.report.html import write_html

        index = write_html(run_dir / "html", run, rows, summary, pngs)
        outputs["html"] = str(index.relative_to(run_dir))
    summary["outputs"] = outputs
    write_atomic(run_dir / SUMMARY, redact_text(json.dumps(summary, indent=2, ensure_ascii=False)) + "\n")
    write_atomic(run_dir / MARKDOWN, redact_text(markdown(summary)))
    tmp = run_dir / (PER_SAMPLE + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as handle:
        per_sample_csv(rows, handle)
    tmp.replace(run_dir / PER_SAMPLE)
    return summary
