"""The fairness section of the Markdown and HTML reports: disparity, grouping tables, a choropleth.

Kept apart from ``eval/report.py`` and ``eval/html.py`` so each is one call there (and one
template later). The HTML is offline and within the report's CSP: an inline SVG whose colours
are SVG presentation attributes (no ``style`` attribute, no script), country shapes from the
gazetteer's Natural Earth borders.
"""

from __future__ import annotations

import html
import math
from functools import lru_cache
from typing import Any

from geosleuth.core.country_groups import GROUPINGS

MAP_W, MAP_H = 1000, 500
CHOROPLETH_BINS: tuple[tuple[float, str], ...] = (
    (20.0, "#d7191c"),
    (40.0, "#fdae61"),
    (60.0, "#ffffbf"),
    (80.0, "#a6d96a"),
    (100.0, "#1a9641"),
)
"""(upper bound in %, colour): accuracy < 20, < 40, < 60, < 80, ≤ 100 (ColorBrewer RdYlGn 5)."""
NO_DATA = "#e6e6e6"


def _num(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def fairness_markdown(block: dict[str, Any] | None) -> list[str]:
    """Markdown lines: the disparity of each grouping and the lowest-entropy countries."""
    if not block or not block.get("groupings"):
        return []
    metric = block.get("metric")
    lines = [
        "",
        f"## Fairness: disparity of {metric} across groups (%)",
        "",
        "| grouping | groups | best | worst | gap (points) [95 % CI] | ratio worst/best | macro mean | all |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for grouping, entry in block["groupings"].items():
        d = entry.get("disparity")
        if not d:
            lines.append(f"| {grouping} | – | – | – | – | – | – | – |")
            continue
        lo, hi = d["gap_ci95"]
        lines.append(
            f"| {grouping} | {d['n_groups']} | {d['best']['group']} {_num(d['best']['value'])} | "
            f"{d['worst']['group']} {_num(d['worst']['value'])} | "
            f"{_num(d['gap'])} [{_num(lo)}, {_num(hi)}] | "
            f"{_num(d['ratio'])} | {_num(d['macro_mean'])} | {_num(d['headline'])} |"
        )
    lines += ["", f"Groups of fewer than {block.get('min_group_n')} samples enter no disparity."]
    lines += [f"- {g}: {e['description']}" for g, e in block["groupings"].items()]
    low = (block.get("over_prediction") or {}).get("lowest_entropy") or []
    if low:
        lines += [
            "",
            "## Over-prediction: countries whose predicted cities have the lowest entropy",
            "",
            "H = -Σ p ln p over the cities predicted for the country's images (nats; 0 = always the "
            "same city).",
            "",
            "| country | n | H | distinct cities | most predicted | its share |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {e['country']} | {e['n']} | {_num(e['entropy'])} | {e['distinct_cities']} | "
            f"{e['top_city']} | "
            f"{_num(100 * e['top_share'])} % |"
            for e in low
        ]
    lines += [f"\nNote: {note}." for note in block.get("notes") or ()]
    return lines


def _xy(lat: float, lon: float) -> tuple[float, float]:
    return (lon + 180.0) / 360.0 * MAP_W, (90.0 - lat) / 180.0 * MAP_H


@lru_cache(maxsize=2)
def country_path_data(tolerance_deg: float = 0.25) -> tuple[tuple[str, str], ...]:
    """(alpha-2, SVG path data) of each country shape; empty without a gazetteer. Cached per process."""
    try:
        from geosleuth.gazetteer import get_gazetteer

        shapes = get_gazetteer().country_shapes()
    except (ImportError, AttributeError, OSError, RuntimeError):
        return ()
    out = []
    for code, geometry in sorted(shapes.items()):
        simple = geometry.simplify(tolerance_deg, preserve_topology=True)
        rings = [p.exterior.coords for p in getattr(simple, "geoms", [simple]) if hasattr(p, "exterior")]
        data = "".join(
            "M" + "L".join(f"{x:.1f},{y:.1f}" for x, y in (_xy(lat, lon) for lon, lat in ring)) + "Z"
            for ring in rings
        )
        if data:
            out.append((code, data))
    return tuple(out)


def accuracy_colour(value: float | None) -> str:
    """The `CHOROPLETH_BINS` colour of an accuracy in percent (`NO_DATA` for none)."""
    if value is None:
        return NO_DATA
    for upper, colour in CHOROPLETH_BINS:
        if value < upper:
            return colour
    return CHOROPLETH_BINS[-1][1]


def choropleth_svg(by_country: dict[str, dict[str, Any]], metric: str) -> str:
    """A world map of accuracy per truth country (countries without samples in grey)."""
    parts = [
        f'<svg id="choropleth" viewBox="0 0 {MAP_W} {MAP_H}" xmlns="http://www.w3.org/2000/svg" role="img">'
    ]
    for code, data in country_path_data():
        figures = by_country.get(code)
        value = figures.get("value") if figures else None
        title = f"{code}: {_num(value)} % {metric} (n={figures['n']})" if figures else f"{code}: no sample"
        parts.append(
            f'<path class="country" data-cc="{_esc(code)}" fill="{accuracy_colour(value)}" stroke="#888" '
            f'stroke-width="0.3" d="{data}"><title>{_esc(title)}</title></path>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _legend_svg() -> str:
    keys = [(NO_DATA, "no sample")]
    lower = 0.0
    for upper, colour in CHOROPLETH_BINS:
        keys.append((colour, f"{lower:g}–{upper:g} %"))
        lower = upper
    items = "".join(
        f'<rect x="{i * 110}" y="2" width="14" height="14" fill="{c}" stroke="#888"/>'
        f'<text x="{i * 110 + 18}" y="14" font-size="12">{_esc(label)}</text>'
        for i, (c, label) in enumerate(keys)
    )
    width = 110 * len(keys)
    return (
        f'<svg class="choropleth-legend" viewBox="0 0 {width} 18" width="{width}" height="18">{items}</svg>'
    )


def _breakdown_table(grouping: str, groups: dict[str, dict[str, Any]]) -> str:
    keys = list(dict.fromkeys(k for g in groups.values() for k in g if k not in ("n", "ci95")))
    head = "".join(f"<th>{_esc(k)}</th>" for k in keys)
    rows = []
    for name, group in groups.items():
        ci95 = group.get("ci95") or {}
        cells = []
        for k in keys:
            lo, hi = ci95.get(k) or (None, None)
            interval = f" [{_num(lo)}, {_num(hi)}]" if k in ci95 else ""
            cells.append(f"<td>{_num(group.get(k))}{interval}</td>")
        rows.append(f"<tr><td>{_esc(name)}</td><td>{int(group['n'])}</td>{''.join(cells)}</tr>")
    return (
        f'<h3>By {_esc(grouping)} (%, [95 % CI])</h3><table class="sortable" id="by-{_esc(grouping)}">'
        f"<thead><tr><th>{_esc(grouping)}</th><th>n</th>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )


def fairness_html(summary: dict[str, Any]) -> str:
    """The report's fairness section: disparity table, choropleth, per-grouping tables, over-prediction."""
    block = summary.get("fairness") or {}
    if not block.get("groupings"):
        return ""
    metric = block.get("metric", "")
    rows = []
    for grouping, entry in block["groupings"].items():
        d = entry.get("disparity")
        if not d:
            rows.append(
                f'<tr><td>{_esc(grouping)}</td><td colspan="6">no disparity (too few groups)</td></tr>'
            )
            continue
        lo, hi = d["gap_ci95"]
        rows.append(
            f"<tr><td>{_esc(grouping)}</td><td>{d['n_groups']}</td>"
            f"<td>{_esc(d['best']['group'])} {_num(d['best']['value'])}</td>"
            f"<td>{_esc(d['worst']['group'])} {_num(d['worst']['value'])}</td>"
            f"<td>{_num(d['gap'])} [{_num(lo)}, {_num(hi)}]</td><td>{_num(d['ratio'])}</td>"
            f"<td>{_num(d['macro_mean'])}</td></tr>"
        )
    breakdowns = summary.get("breakdowns") or {}
    tables = "".join(_breakdown_table(g, breakdowns[g]) for g in GROUPINGS if breakdowns.get(g))
    low = (block.get("over_prediction") or {}).get("lowest_entropy") or []
    entropy = "".join(
        f"<tr><td>{_esc(e['country'])}</td><td>{e['n']}</td><td>{_num(e['entropy'])}</td>"
        f"<td>{e['distinct_cities']}</td><td>{_esc(e['top_city'])}</td>"
        f"<td>{_num(100 * e['top_share'])} %</td></tr>"
        for e in low
    )
    over = (
        '<h3>Over-prediction (lowest entropy of predicted cities, nats)</h3><table id="over-prediction">'
        "<tr><th>country</th><th>n</th><th>H</th><th>distinct cities</th><th>most predicted</th>"
        f"<th>its share</th></tr>{entropy}</table>"
        if entropy
        else ""
    )
    notes = "".join(f"<p>Note: {_esc(n)}.</p>" for n in block.get("notes") or ())
    return (
        f'<h2 id="fairness">Fairness: {_esc(metric)} across groups (%)</h2>'
        '<table id="disparity"><tr><th>grouping</th><th>groups</th><th>best</th><th>worst</th>'
        "<th>gap, points [95 % CI]</th><th>ratio worst/best</th><th>macro mean</th></tr>"
        f"{''.join(rows)}</table>"
        f"<h3>{_esc(metric)} by truth country</h3>{_legend_svg()}"
        f"{choropleth_svg(block.get('by_country') or {}, metric)}{tables}{over}{notes}"
    )
