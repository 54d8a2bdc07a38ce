"""WhereStreet's released LLM judge, asked of any OpenAI-compatible model (``score --judge``).

The released evaluation (``eval_wherestreet`` ``answer_score`` / ``thinking_score``) asks Gemini
three fixed questions; this module asks the same questions, word for word
(``judge_prompts/wherebench_*.md``), as one user message each, and reads the replies as the
released code reads them:

- path score of a text item: the float in ``<answer>SCORE</answer>``, clamped to [0, 1];
  no such tag scores 0;
- a coordinate answer with fewer than two numbers: the judge converts it; ``<answer>lat,
  lon</answer>`` is read, anything else leaves the item unanswered;
- thinking: one question per key clue; the reply lower-cased, ``<answer>yes</answer>`` means
  used. A blank clue is asked nothing and counts as not used (the released score divides by
  every clue).

Replies are read from their first `MAX_REPLY_CHARS` characters (bounded regex work). A failed
request is that item's failure (recorded, scored 0); the batch goes on.
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

from geosleuth.eval.judges.tasks import _chat_client, render
from geosleuth.eval.run.config import JudgeSettings

if TYPE_CHECKING:
    from geosleuth.agent.client import ChatClient

MAX_REPLY_CHARS = 4096
_SCORE = re.compile(r"<answer>\s*([0-9]*\.?[0-9]+)\s*</answer>")
_COORDINATES = re.compile(r"<answer>\s*([-+]?\d*\.?\d+)\s*,\s*([-+]?\d*\.?\d+)\s*</answer>")
_VERDICT = re.compile(r"<answer>\s*(.*?)\s*</answer>")


def read_path_score(reply: str) -> float:
    """``answer_score``'s reading of a text verdict: the tagged float clamped to [0, 1], else 0."""
    m = _SCORE.search(reply[:MAX_REPLY_CHARS].strip())
    return min(max(float(m.group(1)), 0.0), 1.0) if m else 0.0


def read_coordinates(reply: str) -> tuple[float, float] | None:
    """The conversion reply's ``<answer>lat, lon</answer>``; None when absent."""
    m = _COORDINATES.search(reply[:MAX_REPLY_CHARS].strip())
    return (float(m.group(1)), float(m.group(2))) if m else None


def read_clue_verdict(reply: str) -> bool:
    """``thinking_score``'s reading: lower-cased reply, tagged answer exactly "yes"."""
    m = _VERDICT.search(reply[:MAX_REPLY_CHARS].strip().lower())
    return bool(m and m.group(1).strip().lower() == "yes")


class WhereBenchJudge:
    """Synchronous judge for `geosleuth.eval.wherebench.files` (one request at a time, as released)."""

    def __init__(self, settings: JudgeSettings, client: ChatClient | None = None) -> None:
        self.settings = settings
        self._runner = asyncio.Runner()
        self._client = client or _chat_client(settings)
        self.requests = 0

    def _ask(self, prompt: str) -> str:
        self.requests += 1
        messages = [{"role": "user", "content": prompt}]
        reply = self._runner.run(self._client.complete(messages, temperature=self.settings.temperature))
        return reply.first.content or ""

    def path_score(self, predicted: str, ground_truth: str, answer_type: str, hint: str) -> float:
        """The judged path score of a text answer."""
        prompt = render(
            "wherebench_answer",
            predicted=predicted,
            ground_truth=ground_truth,
            answer_type=answer_type,
            hint=hint,
        )
        return read_path_score(self._ask(prompt))

    def coordinates(self, predicted: str, hint: str) -> tuple[float, float] | None:
        """The judge's coordinates for an answer without two numbers."""
        return read_coordinates(self._ask(render("wherebench_coordinates", predicted=predicted, hint=hint)))

    def clues_used(self, thinking_process: str, key_clues: list[str]) -> list[bool]:
        """One verdict per key clue (blank clues: not used, not asked)."""
        used = []
        for clue in key_clues:
            if not clue.strip():
                used.append(False)
                continue
            reply = self._ask(render("wherebench_clue", key_clue=clue, thinking_process=thinking_process))
            used.append(read_clue_verdict(reply))
        return used

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()
