"""The grounding section of the reports: the Markdown here, the HTML the ``grounding.html.j2``
template over `grounding_context`."""

from __future__ import annotations

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


def grounding_context(
    block: dict[str, Any] | None, page_of: Callable[[str], str | None] = lambda _: None
) -> dict[str, Any] | None:
    """What ``grounding.html.j2`` shows: the rates, GeoComp's levels, unsupported claims per sample
    (each sample linked to its page where ``page_of`` names one)."""
    if not block:
        return None
    lines = grounding_markdown(block)
    geocomp = [
        [
            level,
            f["n"],
            f["classes"],
            f"{f['accuracy']:.2f}",
            f"{f['macro_recall']:.2f}",
            f"{f['macro_f1']:.2f}",
        ]
        for level, f in (block.get("geocomp") or {}).items()
    ]
    unsupported = [
        {"id": sid, "page": page_of(sid), "claims": _claims(entry)}
        for sid, entry in list((block.get("unsupported") or {}).items())[:MAX_SHOWN]
    ]
    rates = [line for line in lines if line and not line.startswith(("|", "#", "GeoComp"))]
    return {"rates": rates, "geocomp": geocomp, "unsupported": unsupported}
