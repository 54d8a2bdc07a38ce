"""The arena as HTML: a section any report page can embed, and a page of its own.

The section is a template (``arena.html.j2``, autoescaped) with no inline style or script, so
it sits under the report's Content-Security-Policy (stylesheet and script by hash only)
unchanged; ``ARENA_CSS`` shades the win-rate cells for a page that adds it to its stylesheet.
The page (``arena.html``) carries its own stylesheet under the same kind of policy.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

from geosleuth.eval.report.markup import render, trusted

ARENA_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}"
    "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;"
    "text-align:right}td:first-child,th:first-child{text-align:left}"
    ".arena .w0{background:#fde0dc}.arena .w1{background:#fbeee6}.arena .w2{background:#f5f5f5}"
    ".arena .w3{background:#e3f1e6}.arena .w4{background:#c8e6c9}"
)
"""Win-rate shades, worst to best (w0 under 20 %, w4 from 80 %)."""


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _shade(rate: float) -> str:
    return f"w{min(4, int(rate * 5))}"


def arena_context(result: dict[str, Any]) -> dict[str, Any]:
    """What ``arena.html.j2`` shows, from the JSON of ``eval.report.arena.arena_result``."""
    models = list(result["ratings"])
    anchor = result.get("anchor")
    rows = [
        [
            str(rank), model, _num(r["bt"]),
            "—" if r["ci95"] is None else f"{r['ci95'][0]:.1f} – {r['ci95'][1]:.1f}",
            _num(r["elo"]), str(int(r["battles"])),
        ]
        for rank, (model, r) in enumerate(result["ratings"].items(), start=1)
    ]  # fmt: skip
    matrix = []
    for m in models:
        cells = []
        for o in models:
            rate = result["win_rate"][m].get(o)
            cells.append(None if rate is None else {"shade": _shade(rate), "rate": f"{100.0 * rate:.1f} %"})
        matrix.append({"model": m, "cells": cells})
    return {
        "n_battles": int(result["n_battles"]),
        "pinned": f"{anchor['model']} pinned at {anchor['rating']:g}" if anchor else "ratings average 1000",
        "rounds": int(result["bootstrap"]["rounds"]),
        "rows": rows,
        "models": models,
        "matrix": matrix,
        "notes": list(result.get("notes", [])),
    }


def arena_section(result: dict[str, Any]) -> str:
    """``<section class="arena">``: the leaderboard, the win-rate matrix and the notes."""
    return render("arena.html.j2", arena=arena_context(result))


def arena_page(result: dict[str, Any]) -> str:
    """A standalone page around the section, requesting nothing (its stylesheet allowed by hash)."""
    digest = base64.b64encode(hashlib.sha256(ARENA_CSS.encode()).digest()).decode()
    policy = f"default-src 'none'; style-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    return render("arena_page.html.j2", arena=arena_context(result), policy=policy, css=trusted(ARENA_CSS))
