"""GeoAgent's consistency reward: does the reasoning actually support the conclusion?

For each level (country, region, precise place) a judge model reads the rollout's reasoning
with that level's conclusion (and every finer one, which would give it away) masked out,
the coarser conclusions given as context, and re-derives the level. The level counts when
the judge's answer matches the model's own conclusion. The reward is
``Σ αₗ · matchₗ`` (α = 0.1 / 0.6 / 0.3) times a length sigmoid of the reasoning, so a bare
answer with no reasoning cannot earn it. Requests run concurrently (bounded), identical
prompts are answered once (cache), and a judge failure or timeout counts 0 for that level
with the reason logged and kept in `ConsistencyJudge.failures`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from geosleuth.core.countries import country_name
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import Prediction
from geosleuth.core.rewards import SEMANTIC_ALPHAS, SEMANTIC_LEVELS, default_similarity, semantic_levels

log = logging.getLogger(__name__)

MAX_KEPT_FAILURES = 10_000

_STRIP = re.compile(
    r"<(tool_response|tool_call|answer|observation)>.*?(?:</\1>|\Z)|<\|im_start\|>(?:tool|user).*?(?:<\|im_end\|>|\Z)",
    re.S | re.I,
)
_TAGS = re.compile(r"</?think>|<\|im_(?:start|end)\|>(?:assistant)?", re.I)
_JSON = re.compile(r"\{.*\}", re.S)

_LEVEL_WORDS = {
    "country": "country",
    "region": "province / state / region",
    "precise": "city or more precise place",
}


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge runs and how the reward is shaped."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in logs or reprs
    timeout_s: float = 30.0
    max_retries: int = 1
    concurrency: int = 32
    match_threshold: float = 0.8
    length_midpoint_words: float = 40.0
    length_scale_words: float = 10.0
    cache_size: int = 100_000
    temperature: float = 0.0
    max_tokens: int = 64


@dataclass
class LevelQuery:
    """One judge request: the masked reasoning, the context given, and the conclusion to match."""

    level: str
    prompt: str
    conclusion: str


@dataclass
class ConsistencyResult:
    score: float
    matches: dict[str, float] = field(default_factory=dict)
    length_weight: float = 0.0
    errors: list[str] = field(default_factory=list)


def reasoning_text(rollout: str) -> str:
    """The model's own words: tool calls, tool output and the answer block removed."""
    return re.sub(r"\s+", " ", _TAGS.sub(" ", _STRIP.sub(" ", rollout))).strip()


def _mask(text: str, names: Sequence[str]) -> str:
    for name in sorted({n for n in names if n and len(n) > 1}, key=len, reverse=True):
        text = re.sub(re.escape(name), "[MASKED]", text, flags=re.I)
    return text


def _names(pred: Prediction, level: str) -> list[str]:
    levels = semantic_levels(pred)
    out = [levels.get(level) or ""]
    if level == "country" and pred.country_code:
        out.append(country_name(pred.country_code))
    if level == "precise":
        out += [pred.poi or "", pred.street or "", pred.town or "", pred.city or "", pred.admin2 or ""]
    return [n for n in out if n]


def level_queries(rollout: str, pred: Prediction | None = None) -> list[LevelQuery]:
    """A request per level the model concluded; finer conclusions are masked too."""
    pred = pred or parse_answer(rollout, mode="robust")
    levels = semantic_levels(pred)
    reasoning = reasoning_text(rollout)
    queries: list[LevelQuery] = []
    for i, level in enumerate(SEMANTIC_LEVELS):
        conclusion = levels.get(level)
        if not conclusion:
            continue
        hidden = [n for lv in SEMANTIC_LEVELS[i:] for n in _names(pred, lv)]
        context = {lv: levels.get(lv) for lv in SEMANTIC_LEVELS[:i] if levels.get(lv)}
        prompt = (
            "Below is the reasoning of someone locating a photo; their conclusions are [MASKED].\n"
            f"Reasoning:\n{_mask(reasoning, hidden)}\n\n"
            + (f"Already established: {json.dumps(context, ensure_ascii=False)}\n" if context else "")
            + f"Based only on this reasoning, which {_LEVEL_WORDS[level]} does it point to? "
            'Reply with JSON only: {"answer": "<name>"} or {"answer": null} if the reasoning does not say.'
        )
        queries.append(LevelQuery(level, prompt, conclusion))
    return queries


def length_weight(reasoning: str, midpoint: float, scale: float) -> float:
    """Sigmoid of the word count: ~0 for a bare answer, ~1 for a real argument."""
    words = len(reasoning.split())
    return 1.0 / (1.0 + math.exp(-(words - midpoint) / scale))


def judge_answer(text: str) -> str | None:
    """The judge's ``{"answer": …}``; plain text is accepted as the answer itself."""
    m = _JSON.search(text or "")
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            value = obj.get("answer")
            return str(value).strip() if value else None
    stripped = (text or "").strip()
    return stripped or None


class ConsistencyJudge:
    """Batched, cached consistency scoring through an OpenAI-compatible endpoint."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._cache: OrderedDict[str, str | None] = OrderedDict()
        self._lock = threading.Lock()
        # the most recent judge failures only: a long training run must not grow without bound
        self.failures: deque[dict[str, str]] = deque(maxlen=MAX_KEPT_FAILURES)
        self.requests_sent = 0

    def _key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.config.model}\0{prompt}".encode()).hexdigest()

    def _remember(self, key: str, value: str | None) -> None:
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self.config.cache_size:
                self._cache.popitem(last=False)

    async def _ask(self, client: Any, sem: asyncio.Semaphore, prompt: str) -> tuple[str | None, str | None]:
        """(answer, error); answers are cached, errors are not (a later batch may succeed)."""
        key = self._key(prompt)
        with self._lock:
            if key in self._cache:
                return self._cache[key], None
        from geosleuth.agent.client import ModelError

        async with sem:
            self.requests_sent += 1
            try:
                resp = await asyncio.wait_for(
                    client.complete(
                        [{"role": "user", "content": prompt}],
                        temperature=self.config.temperature,
                        max_tokens=self.config.max_tokens,
                    ),
                    timeout=self.config.timeout_s * (self.config.max_retries + 1) + 1.0,
                )
            except (ModelError, TimeoutError) as exc:
                return None, f"{type(exc).__name__}: {exc or 'timed out'}"
        answer = judge_answer(resp.first.content)
        self._remember(key, answer)
        return answer, None

    async def score_batch(self, rollouts: Sequence[str]) -> list[ConsistencyResult]:
        """Consistency of each rollout in [0, 1]; every request of the batch runs concurrently."""
        from geosleuth.agent.client import ChatClient

        plans = [level_queries(r) for r in rollouts]
        sem = asyncio.Semaphore(max(1, self.config.concurrency))
        client = ChatClient(
            self.config.model,
            self.config.base_url,
            self.config.api_key,
            timeout_s=self.config.timeout_s,
            max_retries=self.config.max_retries,
            backoff_s=0.05,
        )
        try:
            unique = list(dict.fromkeys(q.prompt for plan in plans for q in plan))
            got = await asyncio.gather(*(self._ask(client, sem, p) for p in unique))
        finally:
            await client.aclose()
        by_prompt = dict(zip(unique, got, strict=True))
        results: list[ConsistencyResult] = []
        it = iter([by_prompt[q.prompt] for plan in plans for q in plan])
        for i, (rollout, plan) in enumerate(zip(rollouts, plans, strict=True)):
            results.append(self._combine(i, rollout, plan, [next(it) for _ in plan]))
        return results

    def _combine(
        self, index: int, rollout: str, plan: list[LevelQuery], answers: list[tuple[str | None, str | None]]
    ) -> ConsistencyResult:
        weight = length_weight(
            reasoning_text(rollout), self.config.length_midpoint_words, self.config.length_scale_words
        )
        result = ConsistencyResult(0.0, length_weight=weight)
        alphas = dict(zip(SEMANTIC_LEVELS, SEMANTIC_ALPHAS, strict=True))
        for query, (answer, error) in zip(plan, answers, strict=True):
            if error is not None:
                reason = f"rollout {index} level {query.level}: judge failed ({error}); counted 0"
                log.warning(reason)
                self.failures.append({"rollout": str(index), "level": query.level, "reason": error})
                result.errors.append(reason)
                match = 0.0
            else:
                sim = default_similarity(answer or "", query.conclusion, query.level) if answer else 0.0
                match = 1.0 if sim >= self.config.match_threshold else 0.0
            result.matches[query.level] = match
            result.score += alphas[query.level] * match
        result.score *= weight
        return result

    async def score_texts(self, rollouts: Sequence[str]) -> list[float]:
        return [r.score for r in await self.score_batch(rollouts)]

    def score_texts_sync(self, rollouts: Sequence[str]) -> list[float]:
        """For synchronous callers (verl's reward managers, TRL sync rewards); safe inside a running loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.score_texts(rollouts))
        box: list[list[float] | BaseException] = []

        def run() -> None:
            try:
                box.append(asyncio.run(self.score_texts(rollouts)))
            except BaseException as exc:  # re-raised in the caller's thread
                box.append(exc)

        thread = threading.Thread(target=run)
        thread.start()
        thread.join()
        if isinstance(box[0], BaseException):
            raise box[0]
        return box[0]
