"""A judge model decides arena battles on the reasoning, through the judge client of ``eval.judges``.

The judge sees both agents' reasoning and answers, never the truth (that is what the errors
already decide). Which agent is shown as "A" is fixed per battle by a hash of the sample and the
two models, so half the battles put each run first and a judge's preference for a position
cancels out. Replies are cached by their exact request, like every judge; a battle the judge
could not decide keeps its verdict by error, and the notes count them.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from geosleuth.core.records import Trajectory
from geosleuth.eval.judges.tasks import Judge, JudgeError, answer_text, parse_verdict, reasoning_text, render
from geosleuth.eval.report.arena import ArenaInput, Fight, judged
from geosleuth.eval.run.config import JudgeSettings
from geosleuth.eval.run.store import load_run_trajectories

JUDGE_CACHE = "arena_judge_cache.sqlite"
MAX_REASONING_CHARS = 12_000
"""Reasoning shown per agent (its last characters, where the conclusion is)."""


class ArenaVerdict(BaseModel):
    winner: Literal["A", "B", "tie"]


def swapped(fight: Fight) -> bool:
    """Whether run ``model_b`` is shown first as agent A in this battle."""
    key = f"{fight.sample_id}\x00{fight.model_a}\x00{fight.model_b}".encode()
    return hashlib.sha256(key).digest()[0] % 2 == 1


def _shown(trajectory: Trajectory | None) -> tuple[str, str]:
    reasoning = reasoning_text(trajectory)[-MAX_REASONING_CHARS:] or "(no reasoning)"
    return reasoning, answer_text(trajectory) or "(no answer)"


def battle_prompt(fight: Fight, first: Trajectory | None, second: Trajectory | None) -> str:
    """The judge prompt for one battle, ``first`` being the run shown as agent A."""
    (ra, aa), (rb, ab) = _shown(first), _shown(second)
    return render("arena", reasoning_a=ra, answer_a=aa, reasoning_b=rb, answer_b=ab)


async def _decide(judge: Judge, fight: Fight, a: Trajectory | None, b: Trajectory | None) -> str | None:
    """``model_a`` / ``model_b`` / ``tie`` from the judge, None when it gave no usable verdict."""
    flip = swapped(fight)
    prompt = battle_prompt(fight, b, a) if flip else battle_prompt(fight, a, b)
    try:
        reply, _ = await judge.ask(prompt)
        verdict = parse_verdict(ArenaVerdict, reply).winner
    except (JudgeError, OSError, RuntimeError, ValueError) as exc:
        del exc  # the battle keeps its verdict by error; the caller counts it
        return None
    if verdict == "tie":
        return "tie"
    first_won = verdict == "A"
    return "model_a" if first_won != flip else "model_b"


async def _judge_all(
    data: ArenaInput,
    trajectories: Mapping[str, Mapping[str, Trajectory]],
    settings: JudgeSettings,
    cache: Path,
) -> list[str | None]:
    judge = Judge(settings, cache)
    try:
        return list(
            await asyncio.gather(
                *(
                    _decide(
                        judge,
                        f,
                        trajectories[f.model_a].get(f.sample_id),
                        trajectories[f.model_b].get(f.sample_id),
                    )
                    for f in data.fights
                )
            )
        )
    finally:
        await judge.close()


def judge_fights(data: ArenaInput, settings: JudgeSettings, out: Path) -> ArenaInput:
    """The battles of ``data`` (from runs) decided by the judge; its cache is written under ``out``."""
    runs: Mapping[str, str] = data.settings["runs"]
    ids = {f.sample_id for f in data.fights}
    trajectories = {name: load_run_trajectories(Path(d), ids) for name, d in runs.items()}
    out.mkdir(parents=True, exist_ok=True)
    verdicts = asyncio.run(_judge_all(data, trajectories, settings, out / JUDGE_CACHE))
    undecided = sum(v is None for v in verdicts)
    result = judged(data, [v or f.winner for f, v in zip(data.fights, verdicts, strict=True)])
    result.settings["judge"] = settings.model
    if undecided:
        result.notes.append(
            f"the judge gave no usable verdict on {undecided} of {len(verdicts)} battles; they keep "
            "their verdict by error"
        )
    return result
