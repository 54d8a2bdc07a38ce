"""Grounding of the reasoning: is each place, country and coordinate the final reasoning asserts
supported by the OCR text or a tool result of the same trajectory?

Pure: the caller finds the named places in the texts (the gazetteer does it at the edge) and
hands over `Claim` s and `Evidence`. A claim is supported when some evidence text mentions it (a
name, whole words, case and accents folded; coordinates within `COORDINATE_SUPPORT_KM`). A claim in
a sentence that cites a tool ("the search confirms Lyon") must be supported by that tool's own
results: a tool cited for what it never returned counts as unsupported (WhereBench's
"hallucinating confirmation from irrelevant search results").
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from geosleuth.core.geo import haversine_km
from geosleuth.core.text import normalize

COORDINATE_SUPPORT_KM = 10.0
"""A stated coordinate is supported by an evidence coordinate within this distance."""

CITATIONS: dict[str, tuple[re.Pattern[str], tuple[str, ...]]] = {
    "search": (re.compile(r"(?i)\b(?:search(?:es|ed|ing)?|web results?|search results?)\b"), ("search",)),
    "geocode": (re.compile(r"(?i)\b(?:geocod\w*)\b"), ("geocod",)),
    "map": (re.compile(r"(?i)\b(?:maps?|poi|satellite|street ?view)\b"), ("map", "poi")),
    "ocr": (re.compile(r"(?i)\b(?:ocr|text recogni[sz]\w*)\b"), ("ocr", "observe")),
}
"""Words that cite a tool in a sentence, and the tool-name fragments whose results may back it."""

_SENTENCE = re.compile(r"[^.!?。！？\n]+(?:[.!?。！？]+|\n|$)")


@dataclass(frozen=True)
class Evidence:
    """One text the trajectory received: a tool result (OCR and the observer's findings included)."""

    tool: str
    text: str


@dataclass(frozen=True)
class Claim:
    """One thing the reasoning asserts: a place or country (names to look for) or a coordinate."""

    kind: str  # "place" | "country" | "coordinates"
    text: str  # as the reasoning wrote it
    names: tuple[str, ...] = ()  # the written name and the gazetteer's (any of them supports it)
    point: tuple[float, float] | None = None
    start: int = 0  # character offset in the reasoning (which sentence cites what)


@dataclass(frozen=True)
class Checked:
    claim: Claim
    cited: str | None  # the tool family the claim's sentence cites
    supported: bool
    by: str | None  # the tool whose result supports it


@dataclass
class SampleGrounding:
    """The grounding of one trajectory."""

    sample_id: str
    checked: list[Checked] = field(default_factory=list)
    reasoned: bool = True  # the trajectory has a final reasoning to check
    answer_place: str | None = None
    answer_mentioned: bool | None = None  # None: the answer names no place

    @property
    def unsupported(self) -> list[Checked]:
        return [c for c in self.checked if not c.supported]


def _folded(text: str) -> str:
    return f" {normalize(text)} "


def mentions(evidence_text: str, names: Sequence[str]) -> bool:
    """Whether a (folded) evidence text contains one of the names as whole words."""
    folded = _folded(evidence_text)
    return any(key and f" {key} " in folded for key in (normalize(n) for n in names))


def sentence_citations(text: str) -> list[tuple[int, int, str | None]]:
    """(start, end, cited tool family or None) of each sentence of a text."""
    out = []
    for m in _SENTENCE.finditer(text):
        cited = next((family for family, (words, _) in CITATIONS.items() if words.search(m.group())), None)
        out.append((m.start(), m.end(), cited))
    return out


def _supports(claim: Claim, item: Evidence, evidence_points: list[tuple[float, float]]) -> bool:
    if claim.point is not None:
        lat, lon = claim.point
        return any(
            float(haversine_km(lat, lon, plat, plon)) <= COORDINATE_SUPPORT_KM
            for plat, plon in evidence_points
        )
    return mentions(item.text, claim.names or (claim.text,))


def check_claims(
    reasoning: str,
    claims: Sequence[Claim],
    evidence: Sequence[Evidence],
    evidence_points: Sequence[Sequence[tuple[float, float]]],
) -> list[Checked]:
    """Each claim with the evidence that supports it (``evidence_points[i]``: the coordinates
    stated in ``evidence[i]``); a claim in a sentence citing a tool needs that tool's result."""
    spans = sentence_citations(reasoning)
    out = []
    seen: set[tuple[str, str, str | None]] = set()
    for claim in claims:
        cited = next((c for s, e, c in spans if s <= claim.start < e), None)
        key = (claim.kind, normalize(claim.text), cited)
        if key in seen:  # the same claim made again the same way is checked once
            continue
        seen.add(key)
        allowed = CITATIONS[cited][1] if cited else None
        by = None
        for item, points in zip(evidence, evidence_points, strict=True):
            if allowed is not None and not any(part in item.tool.lower() for part in allowed):
                continue
            if _supports(claim, item, list(points)):
                by = item.tool
                break
        out.append(Checked(claim, cited, by is not None, by))
    return out


def grounding_figures(samples: Sequence[SampleGrounding]) -> dict[str, object]:
    """Per run: the claim-support rate (all claims and per kind), cited claims and how many their
    cited tool backs, and the share of answers whose place no tool or OCR result mentions."""
    checked = [c for s in samples for c in s.checked]
    answers = [s for s in samples if s.answer_mentioned is not None]

    def rate(items: Sequence[Checked]) -> float | None:
        return round(sum(c.supported for c in items) / len(items), 6) if items else None

    by_kind = {
        kind: {"n": len(items), "support_rate": rate(items)}
        for kind in ("place", "country", "coordinates")
        if (items := [c for c in checked if c.claim.kind == kind])
    }
    cited = [c for c in checked if c.cited]
    return {
        "n_trajectories": len(samples),
        "n_reasonings": sum(s.reasoned for s in samples),
        "n_claims": len(checked),
        "claim_support_rate": rate(checked),
        "by_kind": by_kind,
        "n_cited": len(cited),
        "cited_support_rate": rate(cited),
        "n_answers_with_place": len(answers),
        "unmentioned_answer_rate": round(sum(not s.answer_mentioned for s in answers) / len(answers), 6)
        if answers
        else None,
        "samples_with_unsupported": sum(bool(s.unsupported) for s in samples),
    }
