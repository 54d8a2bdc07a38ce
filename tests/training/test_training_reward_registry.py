"""The reward registry: every reward owns its parameters and its paper and released forms;
options against tool-use collapse are off by default; a batch logs one line per problem."""

from __future__ import annotations

import json
import logging
import math

import pytest

from geosleuth.training.rewards.batch import REWARD_NAMES, score_texts
from geosleuth.training.rewards.registry import REGISTRY, REGISTRY_ENTRIES, RewardSpec
from geosleuth.training.rewards.scorers import annealed_tau
from geosleuth.training.trl.reward import make_reward_func

TRUTH = {
    "lat": 48.8584,
    "lon": 2.2945,
    "levels": {"country": "France", "admin1": "Île-de-France", "city": "Paris"},
}
NEAR = '<answer>{"lat": 48.8650, "lon": 2.2800, "city": "Paris", "country": "France"}</answer>'  # ~1.25 km


@pytest.mark.parametrize("name", REWARD_NAMES)
def test_released_true_is_defined_for_every_reward(name: str) -> None:
    entry = REGISTRY[name]
    assert entry.released_source or entry.released_note, f"{name}: say where released=true comes from"
    params = RewardSpec(name, {"released": True}).resolved()
    assert params["released"] is True
    assert entry.scorer(params) is (entry.score_released or entry.score_paper)
    out = score_texts(f"{name}:released=true", [NEAR, "", None], [TRUTH] * 3, step=0)
    assert len(out.scores) == 3 and out.scores[1] == 0.0 and out.scores[2] == 0.0


def test_each_entry_owns_its_parameters() -> None:
    with pytest.raises(ValueError, match="no parameter tau_kn"):
        RewardSpec.parse("spatial:tau_kn=100")
    with pytest.raises(ValueError, match="unknown reward"):
        RewardSpec.parse("nope")
    assert RewardSpec.parse("spatial:released=true").resolved()["max_km"] == 2000.0
    assert RewardSpec.parse("spatial").resolved()["max_km"] is None
    assert RewardSpec.parse("linear").definition is REGISTRY["piecewise"]
    assert len({e.name for e in REGISTRY_ENTRIES}) == len(REGISTRY_ENTRIES)


def test_options_are_off_by_default_and_papers_unchanged() -> None:
    for name in REWARD_NAMES:
        params = RewardSpec(name).resolved()
        assert params["tool_bonus"] == 0.0 and params["released"] is False
    assert score_texts("step", [NEAR], [TRUTH]).scores[0] == 0.8


def test_tool_bonus_pays_only_on_top_of_a_rewarded_answer() -> None:
    calls = "<tool_call>{}</tool_call>" * 3
    far = '<answer>{"lat": 0.0, "lon": 0.0}</answer>'
    texts = [calls + NEAR, NEAR, calls + far, calls]
    plain = score_texts("step", texts, [TRUTH] * 4).scores
    bonus = score_texts("step:tool_bonus=0.1,tool_bonus_cap=2", texts, [TRUTH] * 4).scores
    assert list(plain) == [0.8, 0.8, 0.0, 0.0]
    assert bonus[0] == pytest.approx(0.9)  # min(3, 2)/2 of the bonus
    assert list(bonus[1:]) == [0.8, 0.0, 0.0]  # no call; a wrong answer; no answer
    counted = score_texts("step:tool_bonus=0.1,tool_bonus_cap=2", [NEAR], [TRUTH], tool_calls=[1]).scores
    assert counted[0] == pytest.approx(0.85)


def test_annealed_tau_shrinks_over_training() -> None:
    params = RewardSpec("annealed").resolved()
    assert annealed_tau(params, 0) == pytest.approx(2000.0)
    assert annealed_tau(params, 500) == pytest.approx(math.sqrt(2000.0 * 200.0))
    assert annealed_tau(params, 1000) == pytest.approx(200.0)
    assert annealed_tau(params, 5000) == pytest.approx(200.0)
    text = '<answer>{"lat": 48.8584, "lon": 2.2945}</answer>'
    far = f"<answer>{json.dumps({'lat': 48.8584 - math.degrees(100 / 6371.0), 'lon': 2.2945})}</answer>"
    early = score_texts("annealed", [far, text], [TRUTH] * 2, step=0).scores
    late = score_texts("annealed", [far, text], [TRUTH] * 2, step=1000).scores
    assert early[0] == pytest.approx(math.exp(-100 / 2000), rel=1e-6)
    assert late[0] == pytest.approx(math.exp(-100 / 200), rel=1e-6)
    assert early[1] == late[1] == 1.0
    with pytest.raises(ValueError):
        score_texts("annealed:anneal_steps=0", [text], [TRUTH], step=1)


def test_trl_passes_the_trainer_step_and_the_tool_calls() -> None:
    class State:
        global_step = 1000

    far = f"<answer>{json.dumps({'lat': 48.8584 - math.degrees(100 / 6371.0), 'lon': 2.2945})}</answer>"
    fn = make_reward_func("annealed:tool_bonus=0.5")
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "zoom"}}]},
        {"role": "tool", "content": "<tool_call>not mine</tool_call>"},
        {"role": "assistant", "content": far},
    ]
    got = fn([completion], ground_truth=[TRUTH], trainer_state=State())
    assert got[0] == pytest.approx(math.exp(-100 / 200) + 0.5, rel=1e-6)


def test_a_batch_logs_one_warning_line_per_problem(caplog: pytest.LogCaptureFixture) -> None:
    """3,000 unreadable rollouts: one WARNING line with the count and one escaped, bounded example."""
    junk = "no answer\x00 here\u200b\n" + "x" * 5000
    with caplog.at_level(logging.DEBUG, logger="geosleuth.training.rewards"):
        score_texts("step", [junk] * 3000, [TRUTH] * 3000)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    line = warnings[0].getMessage()
    assert "3000 of 3000 rollouts" in line and "\\u0000" in line and "\\u200b" in line and "\\u000a" in line
    assert "\x00" not in line and "\u200b" not in line and "\n" not in line and len(line) < 400
    assert sum(r.levelno == logging.DEBUG for r in caplog.records) == 3000
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="geosleuth.training.rewards"):
        score_texts("step", [NEAR] * 10, [TRUTH] * 10)
    assert not caplog.records


def test_annealed_without_a_step_keeps_tau_start_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    from geosleuth.training.rewards.scorers import _warn_no_step_once

    _warn_no_step_once.cache_clear()
    far = f"<answer>{json.dumps({'lat': 48.8584 - math.degrees(100 / 6371.0), 'lon': 2.2945})}</answer>"
    with caplog.at_level(logging.WARNING, logger="geosleuth.training.rewards"):
        first = score_texts("annealed", [far], [TRUTH]).scores[0]
        score_texts("annealed", [far], [TRUTH])
    assert first == pytest.approx(math.exp(-100 / 2000), rel=1e-6)
    assert sum("no training step" in r.getMessage() for r in caplog.records) == 1
