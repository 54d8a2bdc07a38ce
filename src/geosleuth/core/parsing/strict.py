"""Strict parsers of the named protocols, composed from the answer families (no repairs)."""

from __future__ import annotations

from geosleuth.core.parsing.base import _Found
from geosleuth.core.parsing.delimiters import _answer_blocks, squeeze
from geosleuth.core.parsing.fields import _from_mapping
from geosleuth.core.parsing.geobench import released_geobench
from geosleuth.core.parsing.json_answer import _json_objects
from geosleuth.core.parsing.keyvalue import _from_lines
from geosleuth.core.parsing.semicolon import _from_semicolons, _semicolon_value


def _strict_generic(text: str, protocol: str | None) -> _Found | None:
    """Strict: one format, no repairs; the first answer block (or the whole text) only.

    Only that region is squeezed: squeezing is local to whitespace runs and a block is bounded
    by its tags, so this reads exactly what squeezing the whole text first would give.
    """
    if protocol == "geoguessr-map":  # ccmdi's GeoBench: its released regex over the whole reply
        return released_geobench(text)
    blocks = _answer_blocks(text)
    region = squeeze(blocks[0] if blocks else text)
    if protocol in (None, "spotagent", "geovista"):
        found = _from_lines(region, strict=True)
        if found is not None and (found.has_coords or protocol is not None):
            return found
    if protocol in (None, "geoagent", "geovista") and (blocks or protocol == "geoagent"):
        found = _from_semicolons(region)
        if found is not None:
            return found
    if protocol in (None, "json", "geovista", "geoagent"):
        for obj in _json_objects(region):
            if isinstance(obj, dict):
                found = _from_mapping(obj, strict=True)
                if protocol == "geoagent" and not found.useful:
                    found = _semicolon_value(obj) or found
                if found.useful:
                    found.fmt = found.fmt or "json"
                    return found
    return None
