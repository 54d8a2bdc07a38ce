"""Self-contained offline HTML report: inline CSS / JS / SVG and images as data URIs.

``index.html`` has the headline metrics, an equirectangular world map of errors (a line from
each prediction to its truth, country outlines from the gazetteer when it is available) and a
sortable table of samples; ``samples/<id>.html`` shows one trajectory: the image, zoom crops,
tool calls with their results, and the model's reasoning. Nothing is fetched from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import logging
import math
from functools import lru_cache
from pathlib import Path
from typing import Any

from geosleuth.bounds.imageio import ImageInputError, thumbnail
from geosleuth.core.records import Sample, Trajectory, cap_text
from geosleuth.eval.judges.tasks import read_judgments
from geosleuth.eval.report.rundata import RunData
from geosleuth.eval.report.scores import ScoreRow
from geosleuth.eval.run.store import load_run_trajectories
from geosleuth.secrets import redact_text

MAP_W, MAP_H = 1000, 500
log = logging.getLogger(__name__)

MAX_SAMPLE_PAGES = 5000
MAX_MAP_POINTS = 5000
"""Beyond these the index shows the worst samples (those with pages) and maps every k-th one,
so a 100k-sample report stays a page a browser opens; per_sample.csv keeps every sample."""
MAX_IMAGE_PX = 1024

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#222;max-width:1200px}
table{border-collapse:collapse;font-size:.9rem}
td,th{border:1px solid #ddd;padding:.25rem .5rem;text-align:left}
th{background:#f4f4f4;cursor:pointer}.fail{color:#b00}.ok{color:#070}
#worldmap{width:100%;height:auto;background:#eef5fb;border:1px solid #ccc}
#worldmap path,#worldmap line{vector-effect:non-scaling-stroke}
#worldmap .land{fill:#fdfdf8;stroke:#9a9a9a;stroke-width:.6}#worldmap .grid{stroke:#d6e3ee;stroke-width:.6}
#worldmap line{stroke-width:1.6;opacity:.8}#worldmap .truth{fill:#1a7f37}#worldmap .pred{fill:#1f6feb}
.legend span{display:inline-block;width:1.2em;height:.35em;margin:0 .25em 0 .75em;vertical-align:middle}
pre{white-space:pre-wrap;background:#f7f7f7;padding:.5rem;border-radius:4px;max-height:30rem;overflow:auto}
.turn{border-left:3px solid #89a;padding-left:.75rem;margin:1rem 0}
.crop{max-width:300px;margin:.25rem;border:1px solid #ccc}
img.main{max-width:100%;max-height:600px}
img.plot{max-width:100%;width:560px;margin:4px}
table{display:block;max-width:100%;overflow-x:auto}
h1,h2,h3{overflow-wrap:anywhere}
@media (max-width:600px){body{margin:.75rem}.crop{max-width:100%}}
"""

SORT_JS = """
document.querySelectorAll('table.sortable th').forEach(function(th, col){
  th.addEventListener('click', function(){
    var body = th.closest('table').tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var asc = th.dataset.asc !== '1'; th.dataset.asc = asc ? '1' : '0';
    rows.sort(function(a, b){
      var x = a.cells[col].dataset.v || a.cells[col].textContent;
      var y = b.cells[col].dataset.v || b.cells[col].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var r = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return asc ? r : -r;
    });
    rows.forEach(function(r){ body.appendChild(r); });
  });
});
var filter = document.getElementById('filter');
if (filter) filter.addEventListener('input', function(){
  var q = filter.value.toLowerCase();
  document.querySelectorAll('#samples tbody tr').forEach(function(r){
    r.style.display = r.textContent.toLowerCase().indexOf(q) >= 0 ? '' : 'none';
  });
});
"""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


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
MAX_HTML_TEXT_CHARS = 20_000
"""Longest model or tool text written into a page; the full text stays in trajectories.jsonl."""


def _text(value: str | None) -> str:
    """Escaped text cut to `MAX_HTML_TEXT_CHARS`, saying where the full text is when cut."""
    text, original = cap_text(value or "", MAX_HTML_TEXT_CHARS)
    if original is None:
        return _esc(text)
    return _esc(f"{text} (shown cut: the full {original:,} characters are in trajectories.jsonl)")


def map_extent(rows: list[ScoreRow], min_width: float = 60.0, pad: float = 0.1) -> tuple[float, ...]:
    """SVG viewBox (x, y, w, h) framing every truth and prediction, 2:1 like the world map.

    Without it a benchmark confined to one region is a cluster of dots on a world map.
    """
    points = [_xy(r.true_lat, r.true_lon) for r in rows if r.true_lat is not None and r.true_lon is not None]
    points += [_xy(r.pred_lat, r.pred_lon) for r in rows if r.pred_lat is not None and r.pred_lon is not None]
    if not points:
        return 0.0, 0.0, float(MAP_W), float(MAP_H)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    width = max(max(xs) - min(xs), 2 * (max(ys) - min(ys))) * (1 + 2 * pad)
    width = min(max(width, min_width), float(MAP_W))
    height = width * MAP_H / MAP_W
    x = min(max((max(xs) + min(xs) - width) / 2, 0.0), MAP_W - width)
    y = min(max((max(ys) + min(ys) - height) / 2, 0.0), MAP_H - height)
    return x, y, width, height


def world_map_svg(rows: list[ScoreRow], pages: set[str]) -> str:
    """The error map: graticule, country outlines, truth → prediction lines coloured by error."""
    x0, y0, width, height = map_extent(rows)
    zoom = width / MAP_W  # markers keep their on-screen size when the map is zoomed in
    parts = [
        f'<svg id="worldmap" viewBox="{x0:.1f} {y0:.1f} {width:.1f} {height:.1f}" '
        'xmlns="http://www.w3.org/2000/svg" role="img">'
    ]
    parts += [
        f'<line class="grid" x1="0" y1="{_xy(lat, 0)[1]:.1f}" x2="{MAP_W}" y2="{_xy(lat, 0)[1]:.1f}"/>'
        for lat in range(-60, 90, 30)
    ]
    parts += [
        f'<line class="grid" x1="{_xy(0, lon)[0]:.1f}" y1="0" x2="{_xy(0, lon)[0]:.1f}" y2="{MAP_H}"/>'
        for lon in range(-150, 180, 30)
    ]
    parts += [f'<path class="land" d="{d}"/>' for d in country_outline_paths()]
    for row in rows:
        if row.true_lat is None or row.true_lon is None:
            continue
        tx, ty = _xy(row.true_lat, row.true_lon)
        title = (
            f"<title>{_esc(row.sample_id)}: {row.distance_km:.1f} km</title>"
            if math.isfinite(row.distance_km)
            else f"<title>{_esc(row.sample_id)}: {_esc(row.status)}</title>"
        )
        link = f"samples/{_page_name(row.sample_id)}" if row.sample_id in pages else None
        inner = title
        if row.pred_lat is not None and row.pred_lon is not None:
            px, py = _xy(row.pred_lat, row.pred_lon)
            colour = _error_colour(row.distance_km)
            inner += (
                f'<line x1="{px:.2f}" y1="{py:.2f}" x2="{tx:.2f}" y2="{ty:.2f}" stroke="{colour}"/>'
                f'<circle class="pred" cx="{px:.2f}" cy="{py:.2f}" r="{1.6 * zoom:.3f}"/>'
            )
        inner += f'<circle class="truth" cx="{tx:.2f}" cy="{ty:.2f}" r="{2 * zoom:.3f}"/>'
        parts.append(f'<a class="err" href="{link}">{inner}</a>' if link else f'<g class="err">{inner}</g>')
    parts.append("</svg>")
    return "".join(parts)


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


def _metric_rows(summary: dict[str, Any]) -> str:
    cells = []
    for name, metric in summary["metrics"].items():
        if isinstance(metric, dict):
            value, (lo, hi) = metric["value"], metric["ci95"]
            shown = "–" if value is None else f"{value:.2f}"  # accuracies are stored in percent
            ci = "" if lo is None else f" [{lo:.2f}, {hi:.2f}]"
            cells.append(
                f"<tr><td>{_esc(name)}{' (%)' if 'acc' in name else ''}</td><td>{shown}{ci}</td></tr>"
            )
        else:
            shown = f"{metric:.2f}" if isinstance(metric, float) else metric
            cells.append(f"<tr><td>{_esc(name)}</td><td>{_esc(shown)}</td></tr>")
    return "".join(cells)


def _page(title: str, body: str) -> str:
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{_esc(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{PAGE_CSP}">'
        f"<style>{PAGE_CSS}</style></head><body>{body}<script>{SORT_JS}</script></body></html>"
    )


def _legend() -> str:
    lines = "".join(f'<span class="e{i}"></span>{_esc(label)}' for i, (label, _) in enumerate(ERROR_LEGEND))
    return (
        '<p class="legend"><b class="key-truth">●</b> truth, <b class="key-pred">●</b> prediction; '
        f"line from prediction to truth by error:{lines}</p>"
    )


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
    map_note = f"<p>One sample in {step} ({len(mapped):,} of {len(rows):,}) is drawn.</p>" if step > 1 else ""
    table_note = (
        f"<p>The {len(listed):,} worst of {len(rows):,} samples; every sample is in "
        "<code>per_sample.csv</code>.</p>"
        if len(listed) < len(rows)
        else ""
    )
    table = []
    for row in listed:
        dist = f"{row.distance_km:.1f}" if math.isfinite(row.distance_km) else "–"
        cls = "ok" if row.status == "ok" else "fail"
        name = (
            f'<a href="samples/{_page_name(row.sample_id)}">{_esc(row.sample_id)}</a>'
            if row.sample_id in pages
            else _esc(row.sample_id)
        )
        table.append(
            f'<tr><td>{name}</td><td class="{cls}">{_esc(row.status)}</td>'
            f'<td data-v="{row.distance_km if math.isfinite(row.distance_km) else 1e9}">{dist}</td>'
            f"<td>{_esc(row.country_code)}</td><td>{_esc(row.continent)}</td><td>{row.turns}</td>"
            f"<td>{row.tool_calls}</td></tr>"
        )
    statuses = ", ".join(f"{k}: {v}" for k, v in summary["status_counts"].items())
    body = (
        f"<h1>Evaluation: {_esc(summary.get('run', {}).get('model'))}</h1>"
        f"<p>{summary['n_finished']} / {summary['n_samples']} finished; {statuses}. "
        f"Protocol <code>{_esc(summary['protocol']['name'])}</code>.</p>"
        f'<table id="metrics"><tr><th>metric</th><th>value [95 % CI]</th></tr>{_metric_rows(summary)}</table>'
        f"{wherebench_html(summary.get('wherebench'))}"
        f"<h2>Errors on the map</h2>{_legend()}{map_note}{world_map_svg(mapped, pages)}"
        f"{_plots_html(plots or [])}"
        f'<h2>Samples</h2>{table_note}<input id="filter" placeholder="filter…">'
        f'<table id="samples" class="sortable"><thead><tr><th>id</th><th>status</th><th>error km</th>'
        f"<th>true country</th><th>true continent</th><th>turns</th><th>tool calls</th></tr></thead>"
        f"<tbody>{''.join(table)}</tbody></table>"
    )
    return _page(f"geosleuth report: {summary.get('run', {}).get('model')}", body)


def _plots_html(plots: list[Path]) -> str:
    """The report's PNG plots, embedded (the page stays one self-contained file per view)."""
    figures = []
    for path in plots:
        try:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
        except OSError:
            continue
        figures.append(f'<img class="plot" alt="{_esc(path.stem)}" src="data:image/png;base64,{data}">')
    return f'<h2>Plots</h2><div id="plots">{"".join(figures)}</div>' if figures else ""


def _tool_call_html(run_dir: Path, call: Any) -> str:
    crops = "".join(
        f'<img class="crop" alt="tool image" src="{uri}">'
        for uri in (image_data_uri(_resolve(run_dir, p), 600) for p in call.result_images)
        if uri
    )
    state = "ok" if call.ok else f"error: {cap_text(call.error or '', MAX_HTML_TEXT_CHARS)[0]}"
    flags = " (cache hit)" if call.cache_hit else ""
    arguments = _text(json.dumps(call.arguments, ensure_ascii=False))
    css = "ok" if call.ok else "fail"
    return (
        f'<div class="call"><b>{_esc(call.name)}</b> <code>{arguments}</code> — '
        f'<span class="{css}">{_esc(state)}</span>{flags}, {call.latency_s:.2f} s'
        f"<pre>{_text(call.result_text)}</pre>{crops}</div>"
    )


def _turns_html(run_dir: Path, trajectory: Trajectory) -> str:
    out = []
    for turn in trajectory.turns:
        reasoning = (
            f"<details open><summary>reasoning</summary><pre>{_text(turn.reasoning)}</pre></details>"
            if (turn.reasoning)
            else ""
        )
        calls = "".join(_tool_call_html(run_dir, c) for c in turn.tool_calls)
        text = f"<pre>{_text(turn.text)}</pre>" if turn.text.strip() else ""  # tool-call-only turns
        out.append(
            f'<div class="turn"><h3>Turn {turn.index + 1}</h3>{reasoning}{text}{calls}'
            f"<small>{turn.usage.prompt_tokens} + {turn.usage.completion_tokens} tokens, "
            f"{turn.latency_s:.2f} s</small></div>"
        )
    return "".join(out)


def _question_html(sample: Sample) -> str:
    """What the task asked beyond the image: choices, hint, and the annotated key clues."""
    parts = []
    if sample.choices:
        options = "".join(f"<li>{_esc(c)}</li>" for c in sample.choices)
        parts.append(f'<p>Choices (answer {_esc(sample.answer)}):</p><ol type="A">{options}</ol>')
    if sample.hint:
        parts.append(f"<p>Hint ({_esc(sample.hint_level)}): {_esc(sample.hint)}</p>")
    if sample.key_clues:
        weights = sample.clue_weights or [None] * len(sample.key_clues)
        clues = "".join(
            f"<li>{_esc(c)}{'' if w is None else f' ({w:.2f})'}</li>"
            for c, w in zip(sample.key_clues, weights, strict=True)
        )
        parts.append(f"<p>Key clues:</p><ul>{clues}</ul>")
    return "".join(parts)


def _judgments_html(judgments: list[dict[str, Any]]) -> str:
    if not judgments:
        return ""
    items = "".join(
        f"<h3>{_esc(j['judge'])}: {'ok' if j['ok'] else 'failed'}</h3>"
        + (f'<p class="fail">{_esc(j.get("error"))}</p>' if j.get("error") else "")
        + f"<pre>{_esc(json.dumps(j.get('result'), ensure_ascii=False))}</pre>"
        for j in judgments
    )
    return f'<h2>Judges</h2><div id="judges">{items}</div>'


def _input_image_html(sample: Sample) -> str:
    """The sample's image, or a note saying why it is not shown (a bomb, a damaged file, …)."""
    if not sample.image:
        return "<p>(image not available)</p>"
    try:
        uri = thumbnail_data_uri(Path(sample.image))
    except ImageInputError as exc:
        return f'<p class="fail">(image not shown: {_esc(str(exc))})</p>'
    return f'<img class="main" alt="input image" src="{uri}">'


def _failed_page(sample_id: str, exc: Exception) -> str:
    """What a sample's page says when it could not be built: the report goes on without it."""
    return _page(
        f"sample {sample_id}",
        f'<p><a href="../index.html">← report</a></p><h1>{_esc(sample_id)}</h1>'
        f'<p class="fail">This page could not be built: {_esc(type(exc).__name__)}: {_esc(str(exc))}</p>',
    )


def sample_html(
    run: RunData,
    sample: Sample,
    row: ScoreRow,
    trajectory: Trajectory | None,
    judgments: list[dict[str, Any]] | None = None,
) -> str:
    pic = _input_image_html(sample)
    dist = f"{row.distance_km:.2f} km" if math.isfinite(row.distance_km) else "no distance"
    truth = ", ".join(f"{k}: {v}" for k, v in sample.labels.items())
    prediction = (
        trajectory.prediction.model_dump(exclude={"raw"}, exclude_none=True)
        if (trajectory and trajectory.prediction)
        else None
    )
    failure = " — " + _text(trajectory.error) if trajectory and trajectory.error else ""
    body = (
        f'<p><a href="../index.html">← report</a></p><h1>{_esc(sample.id)}</h1>{pic}'
        f"<p>Status <b>{_esc(row.status)}</b>{failure}"
        f"; error {dist}.</p><p>Truth: {_esc(sample.lat)}, {_esc(sample.lon)} {_esc(truth)}</p>"
        f"{_question_html(sample)}"
        f"<h2>Prediction</h2><pre>{_text(json.dumps(prediction, ensure_ascii=False, indent=1))}</pre>"
        f"{_judgments_html(judgments or [])}"
    )
    if trajectory is not None:
        body += f'<h2>Trajectory</h2><div id="trajectory">{_turns_html(run.run_dir, trajectory)}</div>'
        if trajectory.prediction and trajectory.prediction.raw:
            body += f"<h2>Final answer text</h2><pre>{_text(trajectory.prediction.raw)}</pre>"
        for i, extra in enumerate(trajectory.samples):
            body += f"<details><summary>sample {i + 1} ({_esc(extra.status.value)})</summary>"
            body += f"{_turns_html(run.run_dir, extra)}</details>"
    return _page(f"sample {sample.id}", body)


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
    ranked = sorted(
        rows, key=lambda r: (r.status == "ok", -(r.distance_km if math.isfinite(r.distance_km) else 1e9))
    )
    chosen = ranked[:MAX_SAMPLE_PAGES]
    pages = {r.sample_id for r in chosen}
    by_id = {s.id: s for s in run.samples}
    judged: dict[str, list[dict[str, Any]]] = {}
    for (sample_id, _), record in sorted(read_judgments(run.run_dir).items()):
        judged.setdefault(sample_id, []).append(record)
    full = load_run_trajectories(run.run_dir, ids=pages)
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


def _pct_cell(value: Any) -> str:
    return "–" if value is None else f"{float(value):.2f}"


def wherebench_html(block: dict[str, Any] | None) -> str:
    """The WhereBench section (percent): WhereCountry both ways, WhereStreet per split, Overall."""
    if not block:
        return ""
    parts = ['<h2 id="wherebench">WhereBench (%)</h2>']
    country = block.get("wherecountry")
    if country:
        parts.append(
            '<table id="wherecountry"><tr><th>WhereCountry</th><th>n</th><th>parsed</th>'
            "<th>accuracy as published (over parsed)</th><th>accuracy every row</th></tr>"
            f"<tr><td></td><td>{int(country['n'])}</td><td>{int(country['parsed'])}</td>"
            f"<td>{_pct_cell(country['accuracy_as_published'])}</td>"
            f"<td>{_pct_cell(country['accuracy_every_row'])}</td></tr></table>"
        )
    street = block.get("wherestreet") or {}
    if street:
        acc = [k for k in next(iter(street.values())) if k.startswith("acc@")]
        head = "".join(f"<th>{_esc(k)}</th>" for k in acc)
        rows = []
        for split, f in street.items():
            tt, tc = f["thinking_text"], f["thinking_coordinates"]
            cells = "".join(f"<td>{_pct_cell(f[k])}</td>" for k in acc)
            rows.append(
                f"<tr><td>{_esc(split)}</td><td>{int(f['n_text'])}</td><td>{_pct_cell(f['path_score'])}</td>"
                f"<td>{int(f['n_coordinates'])}</td>{cells}<td>{_pct_cell(tt['thinking'])}</td>"
                f"<td>{_pct_cell(tt['thinking_shapley'])}</td><td>{_pct_cell(tc['thinking'])}</td>"
                f"<td>{_pct_cell(tc['thinking_shapley'])}</td></tr>"
            )
        parts.append(
            '<table id="wherestreet"><tr><th>WhereStreet split</th><th>text n</th><th>path score</th>'
            f"<th>coord n</th>{head}<th>thinking (text)</th><th>Shapley thinking (text)</th>"
            f"<th>thinking (coord)</th><th>Shapley thinking (coord)</th></tr>{''.join(rows)}</table>"
        )
    parts.append(
        f"<p>Overall (as released): {_pct_cell(block.get('overall'))}; every row: "
        f"{_pct_cell(block.get('overall_every_row'))}; Eq. 2 with Acc@1 km: "
        f"{_pct_cell(block.get('overall_eq2'))}.</p>"
    )
    return "".join(parts)
