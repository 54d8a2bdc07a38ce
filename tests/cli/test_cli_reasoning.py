"""What the user sees of the reasoning: confidence tied to the evidence, candidates marked
chosen / supporting / rejected, OCR text in the trace, whole words, and evidence in a failed
image's JSON record. The OCR engine is replaced by a fixed reading (real clue extraction,
gazetteer and CLI); its own tests live with it."""

from __future__ import annotations

import importlib.util
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image
from typer.testing import CliRunner

from geosleuth.agent.offline import Candidate, evidence_confidence, locate_offline
from geosleuth.cli.app import app
from geosleuth.cli.locate import clip

SEATTLE = "Pike Place Coffee\n1912 Pike Pl, Seattle, WA 98101\nTel. (206) 555-0142"
OSAKA = "Tel. +81 6-6345-1234"
LISBON = "Rua Augusta 100\n1100-053 Lisboa\nTel. +351 21 342 1234"


@dataclass
class Reading:
    """Stands in for the OCR report: the text and its description."""

    text: str

    def describe(self) -> str:
        return "Text found (fixed), one line per region:\n" + "\n".join(
            f"- {line!r}" for line in self.text.splitlines()
        )


def _locate(text: str):
    return locate_offline(Image.new("RGB", (8, 8)), None, ocr=lambda _img: Reading(text))


def test_more_agreeing_evidence_means_more_confidence() -> None:
    seattle, osaka = _locate(SEATTLE).prediction, _locate(OSAKA).prediction
    assert seattle is not None and seattle.city == "Seattle" and seattle.country_code == "US"
    assert osaka is not None and osaka.city == "Osaka"
    assert seattle.confidence >= osaka.confidence  # phone + ZIP + city name vs a phone number alone
    name_only = _locate("Welcome to Seattle").prediction
    assert name_only is not None and name_only.confidence < seattle.confidence


weights = st.lists(st.floats(0.05, 0.6), min_size=0, max_size=4)


@settings(max_examples=40, deadline=None)
@given(own=weights, extra=st.floats(0.05, 0.6), clues=st.integers(0, 4), rival=weights)
def test_confidence_never_drops_when_evidence_is_added(own, extra, clues, rival) -> None:
    def cand(ws: list[float]) -> Candidate:
        return Candidate(0, 0, "x", 1.0, "US", 10.0, weights={f"e{i}": w for i, w in enumerate(ws)})

    rivals = [cand(rival)] if rival else []
    before = evidence_confidence(cand(own), rivals, clues)
    assert evidence_confidence(cand([*own, extra]), rivals, clues) >= before
    assert evidence_confidence(cand(own), rivals, clues + 1) >= before
    assert 0.0 <= before <= 0.95


def test_dropped_candidates_are_marked_rejected() -> None:
    result = _locate(LISBON)
    assert result.prediction is not None and result.prediction.city == "Lisbon"
    (step,) = [s for s in result.steps if s.name == "candidates"]
    lines = step.text.splitlines()
    assert lines[0].startswith("chosen: Lisbon")
    assert any(line.startswith("rejected (weaker than Lisbon): Augsburg") for line in lines)


@pytest.fixture
def fixed_ocr(monkeypatch: pytest.MonkeyPatch):
    from geosleuth.tools import ocr

    def use(text: str) -> None:
        monkeypatch.setattr(ocr, "run_ocr", lambda _img: Reading(text))

    return use


def test_the_trace_shows_the_ocr_text_and_the_verdicts(tmp_path: Path, fixed_ocr) -> None:
    fixed_ocr(LISBON)
    image = tmp_path / "sign.png"
    Image.new("RGB", (8, 8)).save(image)
    result = CliRunner().invoke(app, ["locate", str(image)], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    assert "'1100-053 Lisboa'" in result.output and "'Rua Augusta 100'" in result.output
    assert "rejected (weaker than Lisbon): Augsburg" in result.output
    assert "confidence" in result.output


def test_a_failed_image_keeps_its_evidence_in_json(tmp_path: Path, fixed_ocr) -> None:
    fixed_ocr("Open daily 9-18")
    image = tmp_path / "sign.png"
    Image.new("RGB", (8, 8)).save(image)
    result = CliRunner().invoke(app, ["locate", str(image), "--json"])
    (row,) = json.loads(result.stdout)
    assert row["status"] == "no_evidence" and row["prediction"] is None
    assert "ocr: - 'Open daily 9-18'" in row["evidence"]
    ocr_call = next(c for c in row["tool_calls"] if c["name"] == "ocr")
    assert "- 'Open daily 9-18'" in ocr_call["result"]


def test_clip_cuts_between_words() -> None:
    text = "the quick brown fox jumps over the lazy dog " * 5
    out = clip(text.strip(), 40)
    assert len(out) <= 40 and out.endswith("…")
    assert text.startswith(out[:-1]) and text[len(out) - 1] == " "  # the next character is a space
    assert clip("short", 40) == "short"
    assert clip("x" * 100, 10) == "x" * 9 + "…"  # one long word is cut where it must be


def test_a_state_wide_area_code_alone_answers_the_state_loosely() -> None:
    """(206) is described as "Washington State": the answer is the state, at its radius, with
    no town invented at the state's centre."""
    pred = _locate("Tel. +1 (206) 555-0142").prediction
    assert pred is not None and pred.country_code == "US" and pred.admin1 == "Washington"
    assert pred.city is None and pred.radius_km == 150.0
    seattle = _locate(SEATTLE).prediction
    assert seattle is not None and seattle.city == "Seattle"
    if importlib.util.find_spec("countrystatecity_postal_codes") is None:
        assert seattle.radius_km == 10.0  # the town named beside it
    else:  # its ZIP code 98101 beside it: the ZIP's centroid, at the 2 km floor of a city-centre code
        assert seattle.radius_km == 2.0


def test_confidence_is_the_calibrated_strength_and_big_cities_get_a_wider_radius() -> None:
    """σ(a·logit(s) + b) with the sign-set fit (a, b) = (1.68, 0.75): a strength of 0.5 is
    σ(0.75) = 0.679; the map is monotone and the cap is 0.95; a 4 M city's radius is 20 km."""
    from geosleuth.agent.offline import CALIBRATION, calibrated, city_radius_km

    assert CALIBRATION == (1.68, 0.75)
    assert calibrated(0.5) == pytest.approx(1 / (1 + math.exp(-0.75)), abs=1e-9)
    assert calibrated(0.2) == pytest.approx(1 / (1 + math.exp(-(1.68 * math.log(0.25) + 0.75))), abs=1e-9)
    values = [calibrated(s / 100) for s in range(1, 100)]
    assert values == sorted(values) and len(set(values)) == len(values)
    assert city_radius_km(50_000) == 10.0 and city_radius_km(4_000_000) == pytest.approx(20.0)
    assert city_radius_km(40_000_000) == 40.0
