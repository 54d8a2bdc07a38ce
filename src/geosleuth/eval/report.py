"""`geosleuth report RUN_DIR`: summary.json, Markdown, CSV, plots and the offline HTML report."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosleuth.core.records import Sample
from geosleuth.eval.config import Price, read_manifest
from geosleuth.eval.run import read_samples
from geosleuth.eval.scores import RecordStats, ScoreRow, protocol_for, score_run
from geosleuth.eval.store import TrajectoryStore, write_atomic
from geosleuth.eval.summary import summarize
from geosleuth.secrets import redact_text

SUMMARY = "summary.json"
MARKDOWN = "summary.md"
PER_SAMPLE = "per_sample.csv"


@dataclass
class RunData:
    """Everything stored in a run directory, loaded once for reports and comparisons.

    Trajectories are kept as `RecordStats` (no texts), so a report over a 100k-sample run
    fits in memory; pages that show a trajectory read it with `load_run_trajectories`.
    """

    run_dir: Path
    manifest: dict[str, Any]
    samples: list[Sample]
    records: dict[str, RecordStats]

    @property
    def config(self) -> dict[str, Any]:
        return dict(self.manifest.get("config", {}))


def load_run(run_dir: Path) -> RunData:
    manifest = read_manifest(run_dir)
    return RunData(run_dir, manifest, read_samples(run_dir), load_records(run_dir))


def load_records(run_dir: Path) -> dict[str, RecordStats]:
    """`RecordStats` of every finished trajectory by sample id, streaming the log."""
    return {t.sample_id: RecordStats.of(t) for t in TrajectoryStore(run_dir).records()}


def compute(
    run: RunData, protocol: str | None = None, fields: list[str] | None = None
) -> tuple[dict[str, Any], list[ScoreRow]]:
    """Score rows and the summary of a loaded run."""
    config = run.config
    proto = protocol_for(protocol or config.get("protocol"), run.samples)
    rows = score_run(run.samples, run.records, proto)
    prices = {k: Price.model_validate(v) for k, v in (config.get("prices") or {}).items()}
    summary = summarize(
        rows,
        run.records,
        proto,
        fields=[*(config.get("breakdowns") or []), *(fields or [])],
        prices=prices,
        seed=int(config.get("seed") or 0),
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
    from geosleuth.eval.judges import judge_summary

    judges = judge_summary(run.run_dir)
    if judges:
        summary["judges"] = judges
    return summary, rows


def _fmt(value: Any, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float):
        return f"{100 * value:.2f}" if percent else f"{value:.2f}"
    return str(value)


def _metric_cell(metric: Any, percent: bool) -> str:
    if isinstance(metric, dict):
        lo, hi = metric.get("ci95", [None, None])
        return f"{_fmt(metric['value'], percent)} [{_fmt(lo, percent)}, {_fmt(hi, percent)}]"
    return _fmt(metric)


def markdown(summary: dict[str, Any]) -> str:
    """A human-readable summary: headline metrics with 95 % CIs, statuses, tools, breakdowns."""
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
        percent = "acc" in name
        unit = " (%)" if percent else ""
        lines.append(f"| {name}{unit} | {_metric_cell(metric, percent)} |")
    for name, metric in summary.get("coordinate_levels", {}).items():
        if isinstance(metric, dict):
            lines.append(f"| {name} (%, reverse-geocoded) | {_metric_cell(metric, True)} |")
        else:
            lines += ["", f"Coordinate levels: {metric}."]
    for judge, values in summary.get("judges", {}).items():
        shown = ", ".join(f"{k} {_fmt(v, 'acc' in k or 'score' in k)}" for k, v in values.items())
        lines += ["", f"Judge `{judge}`: {shown}."]
    lines += ["", "| status | samples |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in summary["status_counts"].items()]
    tools = summary["tools"]
    lines += [
        "",
        "## Tool use",
        "",
        "| tool | calls | per sample | success % | cache hit % | mean latency s |",
        "|---|---|---|---|---|---|",
    ]
    for name, t in tools["per_tool"].items():
        lines.append(
            f"| {name} | {t['calls']} | {_fmt(t['calls_per_sample'])} | {_fmt(t['success_rate'], True)} | "
            f"{_fmt(t['cache_hit_rate'], True)} | {_fmt(t['mean_latency_s'])} |"
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
            f"## N = {multi['n']} samples per image",
            "",
            "| threshold | pass@k | Best@N | aggregated |",
            "|---|---|---|---|",
        ]
        for name, by_k in multi["pass@k"].items():
            passes = ", ".join(f"@{k} {_fmt(v, True)}" for k, v in by_k.items())
            lines.append(
                f"| {name} | {passes} | {_fmt(multi['best@n'][name], True)} | "
                f"{_fmt(multi['aggregated'][name], True)} |"
            )
    for field, groups in summary["breakdowns"].items():
        keys = list(dict.fromkeys(k for g in groups.values() for k in g if k != "n"))  # metric order
        lines += [
            "",
            f"## By {field}",
            "",
            "| " + " | ".join([field, "n", *keys]) + " |",
            "|" + "---|" * (len(keys) + 2),
        ]
        for value, group in groups.items():
            cells = [_fmt(group.get(k), "acc" in k) for k in keys]
            lines.append("| " + " | ".join([value, str(group["n"]), *cells]) + " |")
    return "\n".join(lines) + "\n"


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
    "choice_correct",
    "confidence",
    "turns",
    "tool_calls",
    "tool_errors",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
)


def per_sample_csv(rows: list[ScoreRow]) -> str:
    levels = sorted({lv for r in rows for lv in r.level_hits})
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow([*CSV_COLUMNS, *(f"{lv}_hit" for lv in levels)])
    for row in rows:
        values = [getattr(row, c) for c in CSV_COLUMNS]
        values = ["" if v is None or (isinstance(v, float) and math.isnan(v)) else v for v in values]
        writer.writerow([*values, *(row.level_hits.get(lv, "") for lv in levels)])
    return buffer.getvalue()


def write_report(
    run_dir: Path,
    protocol: str | None = None,
    fields: list[str] | None = None,
    html: bool = True,
    plots: bool = True,
) -> dict[str, Any]:
    """Compute and write every report file; returns the summary."""
    run = load_run(run_dir)
    summary, rows = compute(run, protocol, fields)
    outputs: dict[str, Any] = {"summary": SUMMARY, "markdown": MARKDOWN, "csv": PER_SAMPLE}
    if plots:
        from geosleuth.eval.plots import write_plots

        outputs["plots"] = write_plots(run_dir / "plots", rows, summary)
    if html:
        from geosleuth.eval.html import write_html

        outputs["html"] = str(write_html(run_dir / "html", run, rows, summary).relative_to(run_dir))
    summary["outputs"] = outputs
    write_atomic(run_dir / SUMMARY, redact_text(json.dumps(summary, indent=2, ensure_ascii=False)) + "\n")
    write_atomic(run_dir / MARKDOWN, redact_text(markdown(summary)))
    write_atomic(run_dir / PER_SAMPLE, per_sample_csv(rows))
    return summary
