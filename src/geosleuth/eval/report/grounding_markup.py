"""The grounding section of the Markdown and HTML reports (one call in each; a template later)."""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

MAX_SHOWN = 200
"""Samples whose unsupported claims a report page lists (summary.json keeps more)."""


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.2f}"


def _claims(entry: dict[str, Any]) -> str:
    parts = [
        f"{c['kind']} “{c['text']}”" + (f" (cites {c['cited']})" if c.get("cited") else "")
        for c in entry["claims"]
    ]
    if entry.get("answer_place_unmentioned"):
        parts.append(f"answer “{entry['answer_place_unmentioned']}” in no tool or OCR result")
    return "; ".join(parts)


def _sample_cell(sample_id: str, page: str | None) -> str:
    name = html.escape(sample_id)
    return f'<a href="{html.escape(page)}">{name}</a>' if page else name


def grounding_markdown(block: dict[str, Any] | None) -> list[str]:
    """Markdown lines: support rates, GeoComp's per-level figures, unsupported claims per sample."""
    if not block:
        return []
    lines = ["", "## Grounding of the reasoning", ""]
    if block.get("note"):
        lines.append(f"Note: {block['note']}.")
    if "n_claims" in block:
        kinds = ", ".join(f"{k} {_pct(v['support_rate'])} % of {v['n']}" for k, v in block["by_kind"].items())
        lines += [
            f"{block['n_claims']} claims in {block['n_reasonings']} final reasonings (of "
            f"{block['n_trajectories']} trajectories); supported by an "
            f"OCR or tool result: {_pct(block['claim_support_rate'])} % ({kinds or 'none'}); claims citing "
            f"a tool backed by that tool: {_pct(block['cited_support_rate'])} % of {block['n_cited']}; "
            "answers whose place no tool or OCR result mentions: "
            f"{_pct(block['unmentioned_answer_rate'])} % of {block['n_answers_with_place']}.",
        ]
    consistency = block.get("consistency")
    if consistency and consistency.get("n"):
        lo, hi = consistency["ci95"]
        lines += [
            "",
            f"GeoAgent's consistency R_con (judge `{consistency['judge']}`): mean "
            f"{consistency['r_con_mean']:.4f} [{lo:.4f}, {hi:.4f}] over {consistency['n']} trajectories.",
        ]
    geocomp = block.get("geocomp") or {}
    if geocomp:
        lines += [
            "",
            "GeoComp's figures per level (%, macro over every class in truth or answer):",
            "",
            "| level | n | classes | accuracy | macro recall | macro F1 |",
            "|---|---|---|---|---|---|",
        ]
        lines += [
            f"| {level} | {f['n']} | {f['classes']} | {f['accuracy']:.2f} | {f['macro_recall']:.2f} | "
            f"{f['macro_f1']:.2f} |"
            for level, f in geocomp.items()
        ]
    unsupported = block.get("unsupported") or {}
    if unsupported:
        lines += ["", "| sample | unsupported claims |", "|---|---|"]
        lines += [
            f"| {sid} | {_claims(entry).replace('|', '/')} |"
            for sid, entry in list(unsupported.items())[:MAX_SHOWN]
        ]
    return lines


def grounding_html(
    block: dict[str, Any] | None, page_of: Callable[[str], str | None] = lambda _: None
) -> str:
    """The report's grounding section: the rates, GeoComp's levels, unsupported claims per sample
    (each sample linked to its page where ``page_of`` names one)."""
    if not block:
        return ""
    lines = grounding_markdown(block)
    rates = "".join(
        f"<p>{html.escape(line)}</p>" for line in lines if line and not line.startswith(("|", "#", "GeoComp"))
    )
    geocomp = "".join(
        f"<tr><td>{html.escape(level)}</td><td>{f['n']}</td><td>{f['classes']}</td><td>{f['accuracy']:.2f}</td>"
        f"<td>{f['macro_recall']:.2f}</td><td>{f['macro_f1']:.2f}</td></tr>"
        for level, f in (block.get("geocomp") or {}).items()
    )
    table = (
        '<table id="geocomp"><tr><th>level</th><th>n</th><th>classes</th><th>accuracy %</th>'
        f"<th>macro recall %</th><th>macro F1 %</th></tr>{geocomp}</table>"
        if geocomp
        else ""
    )
    unsupported = "".join(
        f"<tr><td>{_sample_cell(sid, page_of(sid))}</td><td>{html.escape(_claims(entry))}</td></tr>"
        for sid, entry in list((block.get("unsupported") or {}).items())[:MAX_SHOWN]
    )
    listed = (
        '<table id="unsupported" class="sortable"><thead><tr><th>sample</th><th>unsupported claims</th></tr>'
        f"</thead><tbody>{unsupported}</tbody></table>"
        if unsupported
        else ""
    )
    return f'<h2 id="grounding">Grounding of the reasoning</h2>{rates}{table}{listed}'
