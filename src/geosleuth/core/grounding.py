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


@dataclass
class GroundingTally:
    """The run's grounding figures summed as samples stream by (no sample is kept)."""

    n_trajectories: int = 0
    n_reasonings: int = 0
    claims: list[int] = field(default_factory=lambda: [0, 0])  # checked claims, supported
    cited: list[int] = field(default_factory=lambda: [0, 0])  # claims citing a tool, supported
    by_kind: dict[str, list[int]] = field(default_factory=dict)
    n_answers: int = 0
    unmentioned: int = 0
    with_unsupported: int = 0

    def add(self, sample: SampleGrounding) -> None:
        self.n_trajectories += 1
        self.n_reasonings += sample.reasoned
        for c in sample.checked:
            for tally in (self.claims, self.by_kind.setdefault(c.claim.kind, [0, 0])):
                tally[0] += 1
                tally[1] += c.supported
            if c.cited:
                self.cited[0] += 1
                self.cited[1] += c.supported
        if sample.answer_mentioned is not None:
            self.n_answers += 1
            self.unmentioned += not sample.answer_mentioned
        self.with_unsupported += bool(sample.unsupported)

    def figures(self) -> dict[str, object]:
        """Per run: the claim-support rate (all claims and per kind), cited claims and how many their
        cited tool backs, and the share of answers whose place no tool or OCR result mentions."""

        def rate(tally: Sequence[int]) -> float | None:
            return round(tally[1] / tally[0], 6) if tally[0] else None

        return {
            "n_trajectories": self.n_trajectories,
            "n_reasonings": self.n_reasonings,
            "n_claims": self.claims[0],
            "claim_support_rate": rate(self.claims),
            "by_kind": {
                kind: {"n": self.by_kind[kind][0], "support_rate": rate(self.by_kind[kind])}
                for kind in ("place", "country", "coordinates")
                if kind in self.by_kind
            },
            "n_cited": self.cited[0],
            "cited_support_rate": rate(self.cited),
            "n_answers_with_place": self.n_answers,
            "unmentioned_answer_rate": round(self.unmentioned / self.n_answers, 6)
            if self.n_answers
            else None,
            "samples_with_unsupported": self.with_unsupported,
        }
