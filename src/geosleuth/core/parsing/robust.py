"""Robust parsing: regions tried in order, formats in order, the first with coordinates wins."""

from __future__ import annotations

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.coordinates import _free_coordinates
from geosleuth.core.parsing.delimiters import _answer_blocks, _outside_think, squeeze
from geosleuth.core.parsing.json_answer import _robust_json
from geosleuth.core.parsing.keyvalue import _from_lines
from geosleuth.core.parsing.prose import _address_text
from geosleuth.core.parsing.semicolon import _from_semicolons

MAX_ANSWER_BLOCKS = 64
"""Answer blocks tried, last first: a rollout has a few; a hostile text's thousands are not read."""


def _robust(text: str) -> _Found | None:
    """Last answer block wins; tool output was removed by the caller; ``text`` is not squeezed."""
    if "<" in text:
        blocks = [b for b in _answer_blocks(text) if b.strip()]
        outside_think = _outside_think(text)
    else:  # no tag at all: no answer block and nothing inside <think> (no scans)
        blocks, outside_think = [], text
    tried = blocks[-MAX_ANSWER_BLOCKS:]
    regions: list[tuple[str, str | None, bool]] = [(b, None, True) for b in reversed(tried)]
    if len(blocks) > 1:
        regions[0] = (regions[0][0], "last_answer_block", True)
    regions.append((outside_think, None, False))
    if outside_think != text:
        regions.append((text, "answer_inside_think", False))
    for region, note, in_block in regions:
        found = _parse_region(region, in_block)
        if found is not None and found.useful:
            found.recovered = ([note] if note else []) + found.recovered
            return found
    return None


def _parse_region(region: str, in_block: bool) -> _Found | None:
    """Formats in order; the first with coordinates stops the search (text formats fill fields).

    JSON reads the region as written; the text formats read it squeezed, computed only when
    one of them runs (an answer whose JSON is complete never needs it)."""
    candidates: list[_Found] = []
    best: _Found | None = None
    squeezed = ""
    for parser in (_robust_json, _robust_lines, _from_semicolons):
        if parser is not _robust_json and not squeezed:
            squeezed = squeeze(region)
        found = parser(squeezed if squeezed else region)
        if found is None:
            continue
        if best is None and found.has_coords:
            best = found
            if "country" in found.fields and "city" in found.fields:
                break  # complete: nothing left to fill
        candidates.append(found)
    if best is None:
        best = _free_coordinates(squeezed, in_block)
        if best is not None:
            candidates.append(best)
    if best is not None:
        for other in candidates:
            for k, v in other.fields.items():
                best.fields.setdefault(k, v)
        return best
    if candidates:
        return candidates[0]
    address = _address_text(squeezed)
    if address is None:
        return None
    return _Found(fields={"address": address[0]}, fmt="address", recovered=address[1])


def _robust_lines(region: str) -> _Found | None:
    return _from_lines(region, strict=False)
