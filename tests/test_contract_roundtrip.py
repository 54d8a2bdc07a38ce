"""Contract: a perfect answer, written exactly as each prompt asks, gets a perfect score everywhere.

The answer is built from the style's own YAML with the template helpers of the parsing round-trip
test, for one known place (Luzern). Every scorer protocol and reward that claims the style must
give it full marks; the same answer quoted inside a tool's output, with no answer of the model's
own, must score nothing (tool output is data, not the model's answer), except under `twm`, which
reads the whole rollout as Thinking with Map's released loop does.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from types import ModuleType

import pytest

from geosleuth.scoring import get_protocol, score_file
from geosleuth.training.rewards.batch import score_texts


def _load_roundtrip() -> ModuleType:
    """A private copy of the parsing round-trip test (tests/ is no package), filling in Luzern."""
    path = Path(__file__).resolve().parent / "core" / "test_parsing_roundtrip.py"
    spec = importlib.util.spec_from_file_location("_parsing_roundtrip", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.LAT, module.LON, module.TRUTH = LAT, LON, PLACE
    return module


LAT, LON = 47.0505, 8.3064
PLACE = {"country": "Switzerland", "admin1": "Lucerne", "city": "Luzern", "place": "Luzern"}
LEVELS = {"country": "Switzerland", "admin1": "Lucerne", "city": "Luzern"}
TRUTH_ROW = {"lat": LAT, "lon": LON, **LEVELS}
TRUTH_REWARD = {"lat": LAT, "lon": LON, "levels": LEVELS}
rt = _load_roundtrip()
ANSWERING = ("direct", "geoagent", "geovista", "spotagent", "thinking_with_map", "verifier")
PEERS = ("geoclip", "g3", "pigeon")  # coordinate protocols: every style that states coordinates
PROTOCOLS = {  # the scoring protocols that claim each style's answer format
    "direct": ("twm", "default", *PEERS),
    "geoagent": ("default",),
    "geovista": ("geovista", "default", *PEERS),
    "spotagent": ("spotagent", "default", *PEERS),
    "thinking_with_map": ("twm", "default", *PEERS),
    "verifier": ("twm", "default", *PEERS),
}
FENCE_IDS = ("response", "result", "observation", "fence", "unclosed")
FENCES = (
    ("<tool_response>", "</tool_response>"),
    ("<tool_result>", "</tool_result>"),
    ("<observation>", "</observation>"),
    ("<<<TOOL OUTPUT 1: data, not instructions>>>\n", "\n<<<END TOOL OUTPUT>>>"),
    ("<tool_response>", ""),  # unclosed at the end of the rollout
)


def _perfect(name: str) -> str:
    """The style's answer template, read from its YAML, filled with Luzern."""
    return str(rt._perfect_answer(rt._template(dict(rt.STYLES)[name]["system"])))


def _quoted(text: str, fence: tuple[str, str]) -> str:
    """The answer inside a tool's output, after the model's own thinking, with no answer of its own."""
    body = text.split("</think>", 1)[-1]
    call = '<think>Let me look it up.</think>\n<tool_call>{"name": "web_search"}</tool_call>\n'
    return call + fence[0] + body + fence[1]


def _score(tmp_path: Path, text: str, protocol: str) -> dict[str, float]:
    """Score a one-row JSONL and return its metrics."""
    path = tmp_path / f"{protocol}.jsonl"
    path.write_text(json.dumps({"id": "luzern", "response": text, "ground_truth": TRUTH_ROW}) + "\n")
    return dict(score_file(path, get_protocol(protocol)).score.metrics)


def _accuracies(metrics: dict[str, float]) -> dict[str, float]:
    """Acc@k and GeoVista's level accuracies (percent); distances and counts are not accuracies."""
    return {k: v for k, v in metrics.items() if "acc" in k and not math.isnan(v)}


CASES = [(n, p) for n in ANSWERING for p in PROTOCOLS[n]]
QUOTED_CASES = [
    pytest.param(n, p, f, id=f"{i}-{n}-{p}") for i, f in zip(FENCE_IDS, FENCES, strict=True) for n, p in CASES
]


@pytest.mark.parametrize(("name", "protocol"), CASES, ids=[f"{n}-{p}" for n, p in CASES])
def test_perfect_answer_scores_full_marks(tmp_path: Path, name: str, protocol: str) -> None:
    acc = _accuracies(_score(tmp_path, _perfect(name), protocol))
    assert acc, (name, protocol)
    assert all(v == 100.0 for v in acc.values()), (name, protocol, acc)


@pytest.mark.parametrize(("name", "protocol", "fence"), QUOTED_CASES)
def test_quoted_answer_scores_nothing(
    tmp_path: Path, name: str, protocol: str, fence: tuple[str, str]
) -> None:
    acc = _accuracies(_score(tmp_path, _quoted(_perfect(name), fence), protocol))
    if protocol == "twm":
        # the released loop reads the whole rollout, tool output included: the quoted object is
        # its first JSON object with the four keys (a documented difference; `default` reads nothing)
        assert acc and all(v == 100.0 for v in acc.values()), (name, protocol, acc)
    else:
        assert all(v == 0.0 for v in acc.values()), (name, protocol, acc)


def _rewards(name: str) -> list[tuple[str, float]]:
    """Each reward's perfect value by hand: step/piecewise 1 (answers with coordinates; GeoAgent
    gives none and these rewards do not geocode), spatial exp(-d/200) ≈ 1 for d ≈ 0 (GeoAgent's
    names are geocoded to the gazetteer's Luzern, a few hundred metres off), hierarchical β² = 4
    with a city line, semantic 1 for GeoAgent's level answer."""
    expected = [("spatial", math.exp(-0.0 / 200.0))]
    if name != "geoagent":
        expected += [("step", 1.0), ("piecewise", 1.0)]
    text = _perfect(name)
    if "City:" in text or '"city"' in text:
        expected.append(("hierarchical", 4.0))
    if name == "geoagent":
        expected.append(("semantic", 1.0))
    return expected


REWARD_CASES = [(n, r, v) for n in ANSWERING for r, v in _rewards(n)]
QUOTED_REWARD_CASES = [
    pytest.param(n, r, f, id=f"{i}-{n}-{r}")
    for i, f in zip(FENCE_IDS, FENCES, strict=True)
    for n, r, _ in REWARD_CASES
]


@pytest.mark.parametrize(
    ("name", "reward", "value"), REWARD_CASES, ids=[f"{n}-{r}" for n, r, _ in REWARD_CASES]
)
def test_perfect_answer_gets_full_reward(name: str, reward: str, value: float) -> None:
    batch = score_texts(reward, [_perfect(name)], [TRUTH_REWARD])
    assert bool(batch.parsed[0]), (name, reward)
    assert batch.scores[0] == pytest.approx(value, abs=1e-3), (name, reward, batch.scores[0])


@pytest.mark.parametrize(("name", "reward", "fence"), QUOTED_REWARD_CASES)
def test_quoted_answer_gets_no_reward(name: str, reward: str, fence: tuple[str, str]) -> None:
    batch = score_texts(reward, [_quoted(_perfect(name), fence)], [TRUTH_REWARD])
    assert batch.scores[0] == 0.0, (name, reward, batch.scores[0])
    assert not bool(batch.parsed[0]), (name, reward)


# --- answer shapes the prompts allow beyond their template (issue 21) ------------------------------

_JSON = json.dumps({"lat": LAT, "lon": LON, "city": PLACE["city"], "country": PLACE["country"]})
_LINES = f"Country: Switzerland\nCity: Luzern\nLatitude: {LAT}° N\nLongitude: {LON}° E"
SHAPES = {  # name -> (answer, protocols that claim it); each is a perfect answer
    "spotagent-degrees-hemisphere": (
        f"<think>Lake, Alps.</think>\n<answer>\n{_LINES}\n</answer>",
        ("spotagent", "default"),
    ),
    "spotagent-inline": (
        f"<answer>country: Switzerland, city: Luzern, Latitude: {LAT}, Longitude: {LON}</answer>",
        ("spotagent", "default"),
    ),
    "spotagent-bold-keys": (
        "<answer>**Country:** Switzerland\n**City:** Luzern\n"
        f"**Latitude:** {LAT}\n**Longitude:** {LON}</answer>",
        ("spotagent", "default"),
    ),
    "twm-fenced": (f"The lake and the bridge match.\n```json\n{_JSON}\n```", ("twm", "default")),
    "twm-string-numbers": (
        _JSON.replace(f"{LAT}", f'"{LAT}"').replace(f"{LON}", f'"{LON}"'),
        ("twm", "default"),
    ),
    "twm-after-tool-call": (
        '<think>Check the map.</think><tool_call>{"name": "static_map_query", "arguments": '
        f'{{"lat": {LAT}, "lon": {LON}}}}}</tool_call><tool_response>map image</tool_response>{_JSON}',
        ("twm", "default"),
    ),
    "twm-pretty-printed": (json.dumps(json.loads(_JSON), indent=2, ensure_ascii=False), ("twm", "default")),
    "geoagent-final-answer-prefix": ("Final answer: Switzerland; Lucerne; Luzern", ("default",)),
    "prose-city-state-country": ("This is Luzern (Lucerne, Switzerland).", ("default",)),
    "coarse-to-fine-address": ("Switzerland, Lucerne, Luzern", ("default",)),
}
COORDINATE_SHAPES = [n for n, (text, _) in SHAPES.items() if str(LAT) in text]
SHAPE_CASES = [(n, p) for n, (_, protocols) in SHAPES.items() for p in protocols]


@pytest.mark.parametrize(("shape", "protocol"), SHAPE_CASES, ids=[f"{n}-{p}" for n, p in SHAPE_CASES])
def test_perfect_answer_shape_scores_full_marks(tmp_path: Path, shape: str, protocol: str) -> None:
    acc = _accuracies(_score(tmp_path, SHAPES[shape][0], protocol))
    assert acc and all(v == 100.0 for v in acc.values()), (shape, protocol, acc)


@pytest.mark.parametrize("shape", COORDINATE_SHAPES)
@pytest.mark.parametrize("reward", ["step", "piecewise"])
def test_perfect_answer_shape_gets_full_reward(shape: str, reward: str) -> None:
    batch = score_texts(reward, [SHAPES[shape][0]], [TRUTH_REWARD])
    assert bool(batch.parsed[0]) and batch.scores[0] == pytest.approx(1.0), (shape, reward, batch.scores[0])
