"""Contract: a perfect answer written exactly as each prompt style asks parses to the right fields.

The answer template is read from the style's own YAML (the ``<answer>`` block or the JSON
object its system prompt shows), its ``<placeholders>`` are filled with one known place, and the
result must parse in robust mode and in the style's strict protocol (``protocol:`` in the YAML).
A prompt that changes its answer format without the parser following fails here. ``geoagent``
(``Country; Region; Place``) is checked from its YAML when present, else from its documented form.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from geosleuth.core.parsing import STRICT_PROTOCOLS, parse_answer
from geosleuth.core.records import ParseStatus

PROMPTS = Path(__file__).resolve().parents[2] / "src" / "geosleuth" / "agent" / "prompts"
SHARED = ("common.yaml", "observer.yaml")  # shared snippets; the observer describes, never answers

LAT, LON = 47.0337, 8.2775
TRUTH = {"country": "Switzerland", "admin1": "Lucerne", "city": "Kriens", "place": "Pilatus Railway"}
GEOAGENT_TEMPLATE = "<answer>\n<country>; <region>; <place>\n</answer>"


def _styles() -> list[tuple[str, dict]]:
    found = {
        p.stem: yaml.safe_load(p.read_text()) for p in sorted(PROMPTS.glob("*.yaml")) if p.name not in SHARED
    }
    found.setdefault("geoagent", {"system": GEOAGENT_TEMPLATE, "protocol": "geoagent"})
    return sorted(found.items())


def _template(system: str) -> str:
    """The answer format a system prompt shows: its last ``<answer>`` block, else its JSON object,
    else its ``country: / lat: / lng:`` lines."""
    blocks = re.findall(r"<answer>.*?</answer>", system, re.S)
    if blocks and "<" in blocks[-1][len("<answer>") : -len("</answer>")]:
        return blocks[-1]
    objects = [line.strip() for line in system.splitlines() if line.strip().startswith('{"lat"')]
    if objects:
        return objects[-1]
    lines = [line.strip() for line in system.splitlines() if re.match(r"(country|lat|lng): <", line.strip())]
    if lines:  # ccmdi's GeoBench: three bare answer lines
        return "\n".join(lines)
    assert "<country>; <region>; <place>" in system, "the prompt shows no answer format"
    return GEOAGENT_TEMPLATE  # GeoAgent shows its format in the JSON FinalAnswer and literal examples


def _value(placeholder: str, line: str) -> str:
    """What a perfect answer writes in place of ``<placeholder>`` on ``line``."""
    name = placeholder.lower()
    key = line.strip().lower()
    if "latitude" in name or (name == "decimal degrees" and key.startswith("latitude")):
        return str(LAT)
    if "longitude" in name or (name == "decimal degrees" and key.startswith("longitude")):
        return str(LON)
    for word, level in (("country", "country"), ("province", "admin1"), ("state", "admin1"),
                        ("region", "admin1"), ("city", "city"), ("place", "place")):  # fmt: skip
        if word in name:
            return TRUTH[level]
    if name == "0..1":
        return "0.8"
    if "candidate" in name:
        return "1"
    raise AssertionError(f"unknown placeholder <{placeholder}> in the answer format")


def _perfect_answer(template: str) -> str:
    lines = []
    for line in template.split("\n"):
        lines.append(
            re.sub(
                r"<(?!/?answer>)([^<>]+)>",
                lambda m, line=line: _value(m.group(1), line),  # type: ignore[misc]
                line,
            )
        )
    return "<think>Swiss German signs, the lake and Pilatus behind.</think>\n" + "\n".join(lines)


def _asked_levels(template: str) -> set[str]:
    low = template.lower()
    levels = {"country"} if "country" in low else set()
    levels |= {"admin1"} if any(w in low for w in ("province", "state", "region")) else set()
    levels |= {"city"} if "city" in low else set()
    levels |= {"place"} if "place" in low else set()
    levels |= {"coords"} if "lat" in low else set()
    return levels


STYLES = _styles()


@pytest.mark.parametrize(("name", "style"), STYLES, ids=[n for n, _ in STYLES])
def test_perfect_answer_parses_in_robust_and_strict(name: str, style: dict) -> None:
    template = _template(style["system"])
    text = _perfect_answer(template)
    asked = _asked_levels(template)
    protocol = style.get("protocol") or "json"
    assert protocol in STRICT_PROTOCOLS, f"{name}: protocol {protocol!r} has no strict parser"
    for mode, proto in (("robust", None), ("strict", protocol)):
        p = parse_answer(text, mode=mode, protocol=proto)  # type: ignore[arg-type]
        assert p.status in (ParseStatus.OK, ParseStatus.PARTIAL), (name, mode, p)
        assert p.country_code == "CH", (name, mode, p)
        if "coords" in asked:
            assert (p.lat, p.lon) == (LAT, LON) and p.status is ParseStatus.OK, (name, mode, p)
        if "admin1" in asked:
            assert p.level("admin1") == TRUTH["admin1"], (name, mode, p)
        if "city" in asked:
            assert p.level("city") == TRUTH["city"], (name, mode, p)
        if "place" in asked:
            assert p.poi == TRUTH["place"], (name, mode, p)


def test_every_style_is_covered() -> None:
    names = [n for n, _ in STYLES]
    assert {"direct", "geovista", "spotagent", "thinking_with_map", "geoagent"} <= set(names)
