"""Read-only access to evaluation run directories for the Runs pages.

Each ``--runs`` path is a run directory itself (it has ``run.json``) or a folder of them.
Runs are addressed by a short unique name, never by a path from the browser; files are
served only from inside their run directory.
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geosleuth.core.records import Sample, Trajectory
from geosleuth.eval.report.write import MARKDOWN, PER_SAMPLE, SUMMARY
from geosleuth.eval.run.config import MANIFEST, SAMPLES
from geosleuth.eval.run.pipeline import read_samples
from geosleuth.eval.run.store import TrajectoryStore

HEADLINE = ("acc@1km", "acc@25km", "acc@200km", "acc@750km", "acc@2500km", "median_km")
"""Metrics shown in the run list when a run has them (the rest are on the run's page)."""


TEXT_COLUMNS = frozenset({"sample_id", "status", "answer_type", "country_code", "continent"})


class RunNotFound(LookupError):
    """An unknown run name, sample id or file."""


def _is_run(path: Path) -> bool:
    return (path / MANIFEST).is_file() or (path / SAMPLES).is_file()


def discover(paths: list[Path]) -> dict[str, Path]:
    """Map a unique short name to each run directory found under ``paths`` (one level deep)."""
    found: list[Path] = []
    for path in paths:
        if _is_run(path):
            found.append(path.resolve())
        elif path.is_dir():
            found += sorted(p.resolve() for p in path.iterdir() if p.is_dir() and _is_run(p))
    names: dict[str, Path] = {}
    for run_dir in dict.fromkeys(found):
        name, n = run_dir.name, 2
        while name in names:
            name, n = f"{run_dir.name}-{n}", n + 1
        names[name] = run_dir
    return names


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _stored_summary(run_dir: Path) -> dict[str, Any] | None:
    """summary.json with accuracies in percent (runs reported before that convention are converted)."""
    from geosleuth.eval.report.summary import percent_summary

    summary = _read_json(run_dir / SUMMARY)
    return percent_summary(summary) if summary is not None else None


def _metric_value(metric: Any) -> float | None:
    value = metric.get("value") if isinstance(metric, dict) else metric
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def headline(summary: dict[str, Any]) -> dict[str, float | None]:
    """The run list's numbers: the preferred metrics present, else the first few."""
    metrics = summary.get("metrics") or {}
    keys = [k for k in HEADLINE if k in metrics] or list(metrics)[:6]
    return {k: _metric_value(metrics[k]) for k in keys}


@dataclass
class RunIndex:
    """The runs the server was started with; re-scanned on every listing (runs grow while watched)."""

    roots: list[Path]

    def runs(self) -> dict[str, Path]:
        return discover(self.roots)

    def run_dir(self, name: str) -> Path:
        run_dir = self.runs().get(name)
        if run_dir is None:
            raise RunNotFound(f"no run named {name!r}")
        return run_dir

    def listing(self) -> list[dict[str, Any]]:
        return [self.overview(name, path) for name, path in self.runs().items()]

    def overview(self, name: str, run_dir: Path) -> dict[str, Any]:
        """Name, model, dataset, counts and headline metrics (``reported`` false before `report`)."""
        manifest = _read_json(run_dir / MANIFEST) or {}
        summary = _stored_summary(run_dir)
        dataset = manifest.get("dataset") or {}
        out: dict[str, Any] = {
            "name": name,
            "model": manifest.get("model"),
            "created_at": manifest.get("created_at"),
            "dataset": dataset.get("source") if isinstance(dataset, dict) else None,
            "reported": summary is not None,
            "html_report": f"/runs/{name}/report/" if (run_dir / "html" / "index.html").is_file() else None,
            "downloads": {
                file: f"/api/runs/{name}/download/{file}"
                for file in (PER_SAMPLE, SUMMARY)
                if (run_dir / file).is_file()
            },
        }
        if summary is not None:
            out |= {
                "n_samples": summary.get("n_samples"),
                "n_finished": summary.get("n_finished"),
                "n_failed": summary.get("n_failed"),
                "status_counts": summary.get("status_counts") or {},
                "protocol": (summary.get("protocol") or {}).get("name"),
                "headline": headline(summary),
            }
        return out

    def detail(self, name: str) -> dict[str, Any]:
        """The overview plus every metric, the Markdown summary and the sample table."""
        run_dir = self.run_dir(name)
        summary = _stored_summary(run_dir) or {}
        markdown = run_dir / MARKDOWN
        return self.overview(name, run_dir) | {
            "metrics": {k: _metric_value(v) for k, v in (summary.get("metrics") or {}).items()},
            "ci95": {
                k: v.get("ci95") for k, v in (summary.get("metrics") or {}).items() if isinstance(v, dict)
            },
            "summary_md": markdown.read_text(encoding="utf-8") if markdown.is_file() else None,
            "samples": self.sample_rows(run_dir),
        }

    def sample_rows(self, run_dir: Path) -> list[dict[str, Any]]:
        """Per-sample rows from ``per_sample.csv`` when reported, else ids and statuses."""
        table = run_dir / PER_SAMPLE
        if table.is_file():
            with table.open(encoding="utf-8", newline="") as handle:
                return [_typed(row) for row in csv.DictReader(handle)]
        statuses = TrajectoryStore(run_dir).statuses()
        return [{"sample_id": s.id, "status": statuses.get(s.id, "missing")} for s in _samples(run_dir)]

    def sample_row(self, name: str, sample_id: str) -> dict[str, Any] | None:
        """The sample's scored row (distance, level hits) when the run has been reported."""
        rows = self.sample_rows(self.run_dir(name))
        return next((r for r in rows if r["sample_id"] == sample_id and "distance_km" in r), None)

    def neighbours(self, name: str, sample_id: str) -> tuple[str | None, str | None]:
        """The ids before and after ``sample_id`` in the run's sample order (None at an end)."""
        ids = [s.id for s in _samples(self.run_dir(name))]
        at = ids.index(sample_id) if sample_id in ids else -1
        if at < 0:
            return None, None
        return (ids[at - 1] if at > 0 else None), (ids[at + 1] if at + 1 < len(ids) else None)

    def sample(self, name: str, sample_id: str) -> tuple[Sample, Trajectory | None]:
        run_dir = self.run_dir(name)
        sample = next((s for s in _samples(run_dir) if s.id == sample_id), None)
        if sample is None:
            raise RunNotFound(f"run {name!r} has no sample {sample_id!r}")
        return sample, TrajectoryStore(run_dir).get(sample_id)

    def file(self, name: str, relative: str) -> Path:
        """A file referenced by a trajectory, only if it lies inside the run directory."""
        run_dir = self.run_dir(name)
        path = (run_dir / relative).resolve()
        if not path.is_relative_to(run_dir) or not path.is_file():
            raise RunNotFound(f"run {name!r} has no file {relative!r}")
        return path


def _samples(run_dir: Path) -> list[Sample]:
    return read_samples(run_dir) if (run_dir / SAMPLES).is_file() else []


def _typed(row: dict[str, str]) -> dict[str, Any]:
    """CSV cells back to numbers / booleans / None where they are such."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if key in TEXT_COLUMNS:
            out[key] = value
        elif value == "":
            out[key] = None
        elif value in ("True", "False"):
            out[key] = value == "True"
        else:
            try:
                number = float(value)
            except ValueError:
                out[key] = value
            else:
                out[key] = number if math.isfinite(number) else None
    return out
