"""The arena as HTML: a section any report page can embed, and a page of its own.

The section is plain, escaped markup with no inline style or script, so it sits under the report's
Content-Security-Policy (stylesheet and script by hash only) unchanged; ``ARENA_CSS`` shades the
win-rate cells for a page that adds it to its stylesheet. The page (``arena.html``) carries its
own stylesheet under the same kind of policy.
"""

from __future__ import annotations

import base64
import hashlib
import html
from typing import Any

ARENA_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;"
    "text-align:right}td:first-child,th:first-child{text-align:left}"
    ".arena .w0{background:#fde0dc}.arena .w1{background:#fbeee6}.arena .w2{background:#f5f5f5}"
    ".arena .w3{background:#e3f1e6}.arena .w4{background:#c8e6c9}"
)
"""Win-rate shades, worst to best (w0 under 20 %, w4 from 80 %)."""


def _esc(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _shade(rate: float) -> str:
    return f"w{min(4, int(rate * 5))}"


def arena_section(result: dict[str, Any]) -> str:
    """``<section class="arena">``: the leaderboard (BT, 95 % CI, Elo, battles), the win-rate matrix
    and the notes, from the JSON of ``eval.arena.arena_result``."""
    models = list(result["ratings"])
    anchor = result.get("anchor")
    pinned = f"{_esc(anchor['model'])} pinned at {anchor['rating']:g}" if anchor else "ratings average 1000"
    rows = []
    for rank, (model, r) in enumerate(result["ratings"].items(), start=1):
        ci = "—" if r["ci95"] is None else f"{r['ci95'][0]:.1f} – {r['ci95'][1]:.1f}"
        rows.append(
            f"<tr><td>{rank}</td><td>{_esc(model)}</td><td>{_num(r['bt'])}</td><td>{ci}</td>"
            f"<td>{_num(r['elo'])}</td><td>{int(r['battles'])}</td></tr>"
        )
    head = "".join(f"<th>{_esc(m)}</th>" for m in models)
    matrix = []
    for m in models:
        cells = []
        for o in models:
            rate = result["win_rate"][m].get(o)
            cells.append(
                "<td>—</td>" if rate is None else f'<td class="{_shade(rate)}">{100.0 * rate:.1f} %</td>'
            )
        matrix.append(f"<tr><th>{_esc(m)}</th>{''.join(cells)}</tr>")
    notes = "".join(f"<li>{_esc(n)}</li>" for n in result.get("notes", []))
    return (
        '<section class="arena" id="arena">'
        f"<h2>Arena ({int(result['n_battles'])} battles)</h2>"
        f"<p>Bradley–Terry MLE, ties half a win, 400·β + 1000, {pinned}; 95 % interval from "
        f"{int(result['bootstrap']['rounds'])} bootstrap resamples; online Elo (K = 4, from 1000, "
        "in battle order).</p>"
        "<table><tr><th>#</th><th>model</th><th>BT</th><th>95 % CI</th><th>Elo</th><th>battles</th></tr>"
        f"{''.join(rows)}</table>"
        "<h3>Win rate (row over column, ties half)</h3>"
        f"<table><tr><th></th>{head}</tr>{''.join(matrix)}</table>"
        f"{f'<ul>{notes}</ul>' if notes else ''}</section>"
    )


def arena_page(result: dict[str, Any]) -> str:
    """A standalone page around the section, requesting nothing (its stylesheet allowed by hash)."""
    digest = base64.b64encode(hashlib.sha256(ARENA_CSS.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>Arena</title>'
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">'
        f"<style>{ARENA_CSS}</style></head><body>{arena_section(result)}</body></html>"
    )
