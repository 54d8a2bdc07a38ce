"""GeoVista's verifier as released: the judge's verdict replaces the whole-term rule."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from geosleuth.core.records import ParseStatus, Prediction, Sample, Trajectory
from geosleuth.eval.judges.tasks import _run_protocol, judge_levels_geovista

SAMPLE = Sample(id="a", labels={"country": "Switzerland", "admin1": "Lucerne", "city": "Kriens"})


def _traj(raw: str) -> Trajectory:
    return Trajectory(sample_id="a", model="m", prediction=Prediction(raw=raw, status=ParseStatus.OK))


def _ask(reply: str):  # type: ignore[no-untyped-def]
    async def ask(prompt: str) -> tuple[str, bool]:
        assert "Kriens" in prompt  # the truth goes to the judge, the answer too
        return reply, False

    return ask


def test_verdict_replaces_rule_and_is_fixed_up() -> None:
    # the rule credits everything (the city is named); the verdict says only the city -> all three
    j = asyncio.run(
        judge_levels_geovista(
            SAMPLE, _traj("It is Kriens."), _ask('{"country": false, "state": false, "city": true}')
        )
    )
    assert j.ok and j.result["rule"] == {"country": True, "admin1": True, "city": True}
    assert j.result["combined"] == {"country": True, "admin1": True, "city": True}
    # the rule hits, the verdict says no: the verdict wins (rule OR judge would say yes)
    j = asyncio.run(
        judge_levels_geovista(
            SAMPLE, _traj("It is Kriens."), _ask('{"country": false, "state": false, "city": false}')
        )
    )
    assert j.result["combined"] == {"country": False, "admin1": False, "city": False}


def test_unusable_verdict_and_missing_answer_are_recorded_misses() -> None:
    j = asyncio.run(judge_levels_geovista(SAMPLE, _traj("Kriens"), _ask("no json here")))
    assert not j.ok and j.result["combined"] == {"country": False, "admin1": False, "city": False}
    j = asyncio.run(judge_levels_geovista(SAMPLE, None, _ask("{}")))
    assert j.ok and j.error == "no answer" and not any(j.result["combined"].values())


def test_protocol_read_from_run_manifest(tmp_path: Path) -> None:
    assert _run_protocol(tmp_path) is None
    (tmp_path / "run.json").write_text(json.dumps({"protocol": "geovista"}))
    assert _run_protocol(tmp_path) == "geovista"
