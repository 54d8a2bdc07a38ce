"""Self-contained offline HTML report: inline CSS / JS / SVG and images as data URIs.

``index.html`` has the headline metrics, an equirectangular world map of errors (a line from
each prediction to its truth, country outlines from the gazetteer when it is available) and a
sortable table of samples; ``samples/<id>.html`` shows one trajectory: the image, zoom crops,
tool calls with their results, and the model's reasoning. Nothing is fetched from anywhere.

The markup is Jinja2 templates (`geosleuth.eval.report.markup`, autoescaped); this module gathers what
they show. The index is `INDEX_SECTIONS` in order: a new section is a template there plus its
context entry in `index_html`.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import io
import json
import logging
import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from geosleuth.bounds.imageio import ImageInputError, thumbnail
from geosleuth.core.records import Sample, Trajectory
from geosleuth.eval.judges.tasks import read_judgments
from geosleuth.eval.report.fairness_markup import fairness_context
from geosleuth.eval.report.grounding_markup import grounding_context
from geosleuth.eval.report.markup import asset, render, trusted
from geosleuth.eval.report.rundata import RunData
from geosleuth.eval.report.scores import ScoreRow
from geosleuth.secrets import redact_text

MAP_W, MAP_H = 1000, 500
log = logging.getLogger(__name__)

MAX_SAMPLE_PAGES = 5000
MAX_MAP_POINTS = 5000
"""Beyond these the index shows the worst samples (those with pages) and maps every k-th one,
so a 100k-sample report stays a page a browser opens; per_sample.csv keeps every sample."""
MAX_IMAGE_PX = 1024
INDEX_SECTIONS = (
    "metrics.html.j2",
    "notes.html.j2",
    "wherebench.html.j2",
    "fairness.html.j2",
    "grounding.html.j2",
    "worldmap.html.j2",
    "plots.html.j2",
    "samples.html.j2",
)
"""The index page's sections in order, each a template of ``templates/`` reading its own
entry of the context `index_html` builds (and printing nothing when that entry is empty)."""

CSS = asset("report.css")
SORT_JS = asset("report.js")


def _xy(lat: float, lon: float) -> tuple[float, float]:
    return (lon + 180.0) / 360.0 * MAP_W, (90.0 - lat) / 180.0 * MAP_H


def _ring_path(coords: Any) -> str:
    points = [_xy(lat, lon) for lon, lat in coords]
    return "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in points) + "Z"


@lru_cache(maxsize=4)
def country_outline_paths(tolerance_deg: float = 0.25) -> tuple[str, ...]:
    """SVG path data of the gazetteer's country shapes (empty when no gazetteer is installed).

    Cached per process: simplifying the borders takes seconds and every report draws the same map.
    """
    try:
        from geosleuth.gazetteer import get_gazetteer

        shapes = get_gazetteer().country_shapes()
    except (ImportError, AttributeError, OSError, RuntimeError):
        return ()
    paths = []
    for geometry in shapes.values():
        simple = geometry.simplify(tolerance_deg, preserve_topology=True)
        polygons = getattr(simple, "geoms", [simple])
        data = "".join(_ring_path(p.exterior.coords) for p in polygons if hasattr(p, "exterior"))
        if data:
            paths.append(data)
    return tuple(paths)


def _error_colour(km: float) -> str:
    if not math.isfinite(km):
        return "#999"
    for limit, (_, colour) in zip((25, 200, 750, 2500), ERROR_LEGEND, strict=False):
        if km < limit:
            return colour
    return ERROR_LEGEND[-1][1]


ERROR_LEGEND = (
    ("< 25 km", "#1a7f37"),
    ("< 200 km", "#8bc34a"),
    ("< 750 km", "#f9a825"),
    ("< 2500 km", "#ef6c00"),
    ("≥ 2500 km", "#c62828"),
)

PAGE_CSS = CSS + "".join(f".legend .e{i}{{background:{c}}}" for i, (_, c) in enumerate(ERROR_LEGEND))
PAGE_CSS += ".legend .key-truth{color:#1a7f37}.legend .key-pred{color:#1f6feb}"  # the web app's colours


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


PAGE_CSP = (
    f"default-src 'none'; img-src data:; style-src {_csp_hash(PAGE_CSS)}; "
    f"script-src {_csp_hash(SORT_JS)}; base-uri 'none'; form-action 'none'"
)
"""The report's policy: its one inline stylesheet and one inline script by hash, data: images,
no requests. A <meta> in each page, so it holds for a report opened from disk."""
REPORT_CSP = PAGE_CSP + "; frame-ancestors 'none'"
"""The same as a header, as the web app serves the report (frame-ancestors works only there)."""


def map_extent(rows: Sequence[ScoreRow], min_width: float = 60.0, pad: float = 0.1) -> tuple[float, ...]:
    """SVG viewBox (x, y, w, h) framing every truth and prediction, 2:1 like the world map.

    Without it a benchmark confined to one region is a cluster of dots on a world map. The bounds
    are kept as the rows stream by (no list of points).
    """
    x_lo = y_lo = math.inf
    x_hi = y_hi = -math.inf
    for r in rows:
        for lat, lon in ((r.true_lat, r.true_lon), (r.pred_lat, r.pred_lon)):
            if lat is not None and lon is not None:
                px, py = _xy(lat, lon)
                x_lo, x_hi, y_lo, y_hi = min(x_lo, px), max(x_hi, px), min(y_lo, py), max(y_hi, py)
    if x_lo == math.inf:
        return 0.0, 0.0, float(MAP_W), float(MAP_H)
    width = max(x_hi - x_lo, 2 * (y_hi - y_lo)) * (1 + 2 * pad)
    width = min(max(width, min_width), float(MAP_W))
    height = width * MAP_H / MAP_W
    x = min(max((x_hi + x_lo - width) / 2, 0.0), MAP_W - width)
    y = min(max((y_hi + y_lo - height) / 2, 0.0), MAP_H - height)
    return x, y, width, height


def world_map_svg(rows: list[ScoreRow], pages: set[str]) -> str:
    """The error map: graticule, country outlines, truth → prediction lines coloured by error."""
    return render("worldmap.svg.j2", worldmap=_worldmap(rows, pages))


class _Marker(NamedTuple):
    """A point of the map, its numbers formatted as the SVG writes them."""

    x: str
    y: str
    r: str
    colour: str = ""


class _MapPoint(NamedTuple):
    title: str
    link: str | None
    pred: _Marker | None
    truth: _Marker


def _worldmap(rows: list[ScoreRow], pages: set[str], thinned: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the map template draws, numbers formatted (the viewBox frames the rows, see `map_extent`)."""
    x0, y0, width, height = map_extent(rows)
    zoom = width / MAP_W  # markers keep their on-screen size when the map is zoomed in
    pred_r, truth_r = f"{1.6 * zoom:.3f}", f"{2 * zoom:.3f}"
    points = []
    for row in rows:
        if row.true_lat is None or row.true_lon is None:
            continue
        tx, ty = _xy(row.true_lat, row.true_lon)
        shown = f"{row.distance_km:.1f} km" if math.isfinite(row.distance_km) else row.status
        pred = None
        if row.pred_lat is not None and row.pred_lon is not None:
            px, py = _xy(row.pred_lat, row.pred_lon)
            pred = _Marker(f"{px:.2f}", f"{py:.2f}", pred_r, _error_colour(row.distance_km))
        link = f"samples/{_page_name(row.sample_id)}" if row.sample_id in pages else None
        points.append(
            _MapPoint(f"{row.sample_id}: {shown}", link, pred, _Marker(f"{tx:.2f}", f"{ty:.2f}", truth_r))
        )
    return {
        "viewbox": f"{x0:.1f} {y0:.1f} {width:.1f} {height:.1f}",
        "width": MAP_W,
        "height": MAP_H,
        "parallels": [f"{_xy(lat, 0)[1]:.1f}" for lat in range(-60, 90, 30)],
        "meridians": [f"{_xy(0, lon)[0]:.1f}" for lon in range(-150, 180, 30)],
        "land": country_outline_paths(),
        "points": points,
        "thinned": thinned,
    }


def _page_name(sample_id: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in sample_id)[:100]
    digest = hashlib.sha1(sample_id.encode()).hexdigest()[:10]
    return f"{safe}-{digest}.html" if safe != sample_id else f"{safe}.html"


def image_data_uri(path: Path, max_px: int = MAX_IMAGE_PX) -> str | None:
    """A downscaled JPEG data URI of an image file (None when it cannot be read)."""
    try:
        return thumbnail_data_uri(path, max_px)
    except ImageInputError:
        return None


def thumbnail_data_uri(path: Path, max_px: int = MAX_IMAGE_PX) -> str:
    """A downscaled JPEG data URI, decoded within the pixel limit; `ImageInputError` says why not.

    A report shows many images: one that is a bomb, damaged or unreadable must cost its own
    thumbnail, never the report.
    """
    try:
        image = thumbnail(path, max_px)
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=85)
    except ImageInputError:
        raise
    except Exception as exc:  # noqa: BLE001 - any decoder failure is this image's, not the report's
        raise ImageInputError(f"{path}: cannot be shown ({type(exc).__name__}: {exc})") from None
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode()


def _resolve(run_dir: Path, reference: str) -> Path:
    path = Path(reference)
    return path if path.is_absolute() else run_dir / path


def _metrics(summary: dict[str, Any]) -> list[dict[str, str]]:
    """The metrics table: name (with its unit) and value with its 95 % interval."""
    out = []
    for name, metric in summary["metrics"].items():
        if isinstance(metric, dict):
            value, (lo, hi) = metric["value"], metric["ci95"]
            shown = "–" if value is None else f"{value:.2f}"  # accuracies are stored in percent
            ci = "" if lo is None else f" [{lo:.2f}, {hi:.2f}]"
            out.append({"name": f"{name}{' (%)' if 'acc' in name else ''}", "value": f"{shown}{ci}"})
        else:
            shown = f"{metric:.2f}" if isinstance(metric, float) else metric
            out.append({"name": name, "value": shown})
    return out


def _page_context(title: str) -> dict[str, Any]:
    """What every page carries: its title, policy, stylesheet and script (the last three trusted)."""
    return {"title": title, "csp": trusted(PAGE_CSP), "css": trusted(PAGE_CSS), "script": trusted(SORT_JS)}


def index_html(
    run: RunData,
    rows: list[ScoreRow],
    summary: dict[str, Any],
    pages: set[str],
    plots: list[Path] | None = None,
) -> str:
    listed = rows if len(rows) <= MAX_SAMPLE_PAGES else [r for r in rows if r.sample_id in pages]
    step = math.ceil(len(rows) / MAX_MAP_POINTS) if rows else 1
    mapped = rows[::step]
    thinned = {"step": step, "drawn": f"{len(mapped):,}", "rows": f"{len(rows):,}"} if step > 1 else None
    cut = {"listed": f"{len(listed):,}", "rows": f"{len(rows):,}"} if len(listed) < len(rows) else None
    model = summary.get("run", {}).get("model")
    return render(
        "index.html.j2",
        **_page_context(f"geosleuth report: {model}"),
        sections=INDEX_SECTIONS,
        model=model,
        n_finished=summary["n_finished"],
        n_samples=summary["n_samples"],
        statuses=", ".join(f"{k}: {v}" for k, v in summary["status_counts"].items()),
        protocol=summary["protocol"]["name"],
        metrics=_metrics(summary),
        notes=[str(note) for note in summary.get("notes") or ()],
        wherebench=summary.get("wherebench"),
        fairness=fairness_context(summary),
        grounding=grounding_context(
            summary.get("grounding"),
            lambda sid: f"samples/{_page_name(sid)}" if sid in pages else None,
        ),
        legend=[label for label, _ in ERROR_LEGEND],
        worldmap=_worldmap(mapped, pages, thinned),
        plots=_plots(plots or []),
        samples={"cut": cut, "rows": [_table_row(row, pages) for row in listed]},
    )


class _TableRow(NamedTuple):
    """A row of the sample table (a tuple: templates read its fields without a dict lookup's detour)."""

    id: str
    page: str | None
    status: str
    css: str
    sort: float
    distance: str
    country: str | None
    continent: str | None
    turns: int
    tool_calls: int


def _table_row(row: ScoreRow, pages: set[str]) -> _TableRow:
    finite = math.isfinite(row.distance_km)
    return _TableRow(
        row.sample_id,
        _page_name(row.sample_id) if row.sample_id in pages else None,
        row.status,
        "ok" if row.status == "ok" else "fail",
        row.distance_km if finite else 1e9,
        f"{row.distance_km:.1f}" if finite else "–",
        row.country_code,
        row.continent,
        row.turns,
        row.tool_calls,
    )


def _plots(plots: list[Path]) -> list[dict[str, str]]:
    """The report's PNG plots, embedded (the page stays one self-contained file per view)."""
    out = []
    for path in plots:
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            continue
        out.append({"name": path.stem, "uri": f"data:image/png;base64,{data}"})
    return out


def _turns(run_dir: Path, trajectory: Trajectory) -> list[tuple[Any, list[tuple[Any, list[str]]]]]:
    """Each turn with its tool calls, each call with the data URIs of its result images."""
    return [
        (
            turn,
            [
                (
                    call,
                    [
                        uri
                        for uri in (image_data_uri(_resolve(run_dir, p), 600) for p in call.result_images)
                        if uri
                    ],
                )
                for call in turn.tool_calls
            ],
        )
        for turn in trajectory.turns
    ]


def _turns_html(run_dir: Path, trajectory: Trajectory) -> str:
    return render("turns.html.j2", turns=_turns(run_dir, trajectory))


def _input_image(sample: Sample) -> dict[str, str | None]:
    """The sample's image as a data URI, or why it is not shown (a bomb, a damaged file, …)."""
    if not sample.image:
        return {"uri": None, "problem": None}
    try:
        return {"uri": thumbnail_data_uri(Path(sample.image)), "problem": None}
    except ImageInputError as exc:
        return {"uri": None, "problem": str(exc)}


def _failed_page(sample_id: str, exc: Exception) -> str:
    """What a sample's page says when it could not be built: the report goes on without it."""
    return render(
        "failed.html.j2",
        **_page_context(f"sample {sample_id}"),
        sample_id=sample_id,
        error_type=type(exc).__name__,
        error=str(exc),
    )


def sample_html(
    run: RunData,
    sample: Sample,
    row: ScoreRow,
    trajectory: Trajectory | None,
    judgments: list[dict[str, Any]] | None = None,
) -> str:
    prediction = (
        trajectory.prediction.model_dump(exclude={"raw"}, exclude_none=True)
        if (trajectory and trajectory.prediction)
        else None
    )
    weights: list[float | None] = list(sample.clue_weights) or [None] * len(sample.key_clues)
    return render(
        "sample.html.j2",
        **_page_context(f"sample {sample.id}"),
        sample=sample,
        row=row,
        image=_input_image(sample),
        failure=trajectory.error if trajectory else None,
        distance=f"{row.distance_km:.2f} km" if math.isfinite(row.distance_km) else "no distance",
        truth=", ".join(f"{k}: {v}" for k, v in sample.labels.items()),
        clues=list(zip(sample.key_clues, weights, strict=True)),
        prediction=json.dumps(prediction, ensure_ascii=False, indent=1),
        judgments=judgments or [],
        trajectory=trajectory,
        turns=_turns(run.run_dir, trajectory) if trajectory else [],
        extras=[(extra, _turns(run.run_dir, extra)) for extra in trajectory.samples] if trajectory else [],
    )


def write_html(
    folder: Path,
    run: RunData,
    rows: list[ScoreRow],
    summary: dict[str, Any],
    plots: list[Path] | None = None,
) -> Path:
    """Write index.html (with ``plots`` embedded) and per-sample pages (worst first when there are
    more than the cap)."""
    (folder / "samples").mkdir(parents=True, exist_ok=True)
    chosen = heapq.nsmallest(  # the worst first, as a sort of every row would rank them, in O(pages)
        MAX_SAMPLE_PAGES,
        rows,
        key=lambda r: (r.status == "ok", -(r.distance_km if math.isfinite(r.distance_km) else 1e9)),
    )
    pages = {r.sample_id for r in chosen}
    by_id = run.samples_by_id(pages)
    judged: dict[str, list[dict[str, Any]]] = {}
    for (sample_id, _), record in sorted(read_judgments(run.run_dir).items()):
        judged.setdefault(sample_id, []).append(record)
    full = run.trajectories  # each page's record read back on its own, not all at once
    for row in chosen:
        trajectory = full.get(row.sample_id)
        try:
            page = sample_html(run, by_id[row.sample_id], row, trajectory, judged.get(row.sample_id))
        except Exception as exc:  # noqa: BLE001 - one sample never costs the report
            log.warning("report page for %s: %s: %s", row.sample_id, type(exc).__name__, exc)
            page = _failed_page(row.sample_id, exc)
        (folder / "samples" / _page_name(row.sample_id)).write_text(redact_text(page), encoding="utf-8")
    index = folder / "index.html"
    index.write_text(redact_text(index_html(run, rows, summary, pages, plots)), encoding="utf-8")
    return index


def wherebench_html(block: dict[str, Any] | None) -> str:
    """The WhereBench section (percent): WhereCountry both ways, WhereStreet per split, Overall."""
    return render("wherebench.html.j2", wherebench=block)
