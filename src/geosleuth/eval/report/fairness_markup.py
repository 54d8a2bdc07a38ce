"""The fairness section of the Markdown and HTML reports: disparity, grouping tables, a choropleth.

The Markdown is written here; the HTML is the ``fairness.html.j2`` template over
`fairness_context`. The HTML is offline and within the report's CSP: an inline SVG whose colours
are SVG presentation attributes (no ``style`` attribute, no script), country shapes from the
gazetteer's Natural Earth borders.
"""

from __future__ import annotations

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


def choropleth(by_country: dict[str, dict[str, Any]], metric: str) -> list[dict[str, str]]:
    """Each country's shape, fill and title for the map of accuracy per truth country (grey: none)."""
    out = []
    for code, data in country_path_data():
        figures = by_country.get(code)
        value = figures.get("value") if figures else None
        title = f"{code}: {_num(value)} % {metric} (n={figures['n']})" if figures else f"{code}: no sample"
        out.append({"code": code, "fill": accuracy_colour(value), "d": data, "title": title})
    return out


def _legend() -> list[dict[str, Any]]:
    keys = [(NO_DATA, "no sample")]
    lower = 0.0
    for upper, colour in CHOROPLETH_BINS:
        keys.append((colour, f"{lower:g}–{upper:g} %"))
        lower = upper
    return [{"x": i * 110, "colour": c, "label": label} for i, (c, label) in enumerate(keys)]


def _breakdown_table(grouping: str, groups: dict[str, dict[str, Any]]) -> dict[str, Any]:
    keys = list(dict.fromkeys(k for g in groups.values() for k in g if k not in ("n", "ci95")))
    rows = []
    for name, group in groups.items():
        ci95 = group.get("ci95") or {}
        cells = []
        for k in keys:
            lo, hi = ci95.get(k) or (None, None)
            cells.append(_num(group.get(k)) + (f" [{_num(lo)}, {_num(hi)}]" if k in ci95 else ""))
        rows.append({"name": name, "n": int(group["n"]), "cells": cells})
    return {"grouping": grouping, "columns": keys, "rows": rows}


def fairness_context(summary: dict[str, Any]) -> dict[str, Any] | None:
    """What ``fairness.html.j2`` shows: disparity per grouping, the choropleth, per-group tables,
    over-prediction (None when the run has no fairness block)."""
    block = summary.get("fairness") or {}
    if not block.get("groupings"):
        return None
    metric = block.get("metric", "")
    disparity = []
    for grouping, entry in block["groupings"].items():
        d = entry.get("disparity")
        if not d:
            disparity.append({"grouping": grouping, "cells": None})
            continue
        lo, hi = d["gap_ci95"]
        disparity.append(
            {
                "grouping": grouping,
                "cells": [
                    str(d["n_groups"]),
                    f"{d['best']['group']} {_num(d['best']['value'])}",
                    f"{d['worst']['group']} {_num(d['worst']['value'])}",
                    f"{_num(d['gap'])} [{_num(lo)}, {_num(hi)}]",
                    _num(d["ratio"]),
                    _num(d["macro_mean"]),
                ],
            }
        )
    breakdowns = summary.get("breakdowns") or {}
    low = (block.get("over_prediction") or {}).get("lowest_entropy") or []
    return {
        "metric": metric,
        "disparity": disparity,
        "legend": _legend(),
        "legend_width": 110 * len(_legend()),
        "countries": choropleth(block.get("by_country") or {}, metric),
        "width": MAP_W,
        "height": MAP_H,
        "tables": [_breakdown_table(g, breakdowns[g]) for g in GROUPINGS if breakdowns.get(g)],
        "over": [
            [e["country"], e["n"], _num(e["entropy"]), e["distinct_cities"], e["top_city"],
             f"{_num(100 * e['top_share'])} %"]
            for e in low
        ],
        "notes": list(block.get("notes") or ()),
    }  # fmt: skip
