"""What a run's contamination guards removed, for ``summary.json`` and the report.

``metadata_withheld``: samples whose image file carried answer-bearing metadata (EXIF GPS,
captions, XMP, IPTC, PNG text, JPEG comments) that the agent was not given (0 when the run
allowed metadata). ``search_results_blocked``: search and POI results the leak guard dropped
(``None`` when the guard was off). Runs made before these were recorded get neither key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def leak_summary(manifest: Mapping[str, Any], blocked: int) -> dict[str, Any]:
    """The two summary keys, from ``run.json`` and the results the records say were blocked."""
    dataset = manifest.get("dataset", {})
    if "pixels_only" not in dataset:
        return {}
    carried = len(dataset.get("image_metadata") or {})
    off = dataset.get("leak_guard") == "off"
    return {
        "metadata_withheld": carried if dataset["pixels_only"] else 0,
        "search_results_blocked": None if off else blocked,
    }


def leak_notes(summary: Mapping[str, Any], manifest: Mapping[str, Any]) -> list[str]:
    """A sentence for each guard that removed something or was turned off (none for a run with
    nothing to withhold and nothing blocked: the summary's zeros say that)."""
    dataset = manifest.get("dataset", {})
    if "pixels_only" not in dataset:
        return []
    n = dataset.get("n_selected")
    carried = len(dataset.get("image_metadata") or {})
    notes = []
    if not dataset["pixels_only"]:
        notes.append(
            f"metadata allowed (--allow-metadata): {carried} of {n} image(s) carried location metadata the "
            "agent could read; not comparable with pixel-only runs"
        )
    elif carried:
        notes.append(
            f"metadata withheld: {carried} of {n} image(s) carried location metadata (GPS, caption, XMP, "
            "IPTC or text); the agent saw pixels only"
        )
    mode, blocked = dataset.get("leak_guard"), summary.get("search_results_blocked")
    if mode == "off":
        notes.append("leak guard off: search and POI results were not screened for the samples' own pages")
    elif blocked:
        hosts = ", ".join(dataset.get("source_hosts") or []) or "none"
        notes.append(
            f"leak guard {mode}: {blocked} search / POI result(s) dropped (source hosts: {hosts}; sample "
            "ids and file names" + ("; coordinates within 1 km of the truth)" if mode == "strict" else ")")
        )
    return notes
