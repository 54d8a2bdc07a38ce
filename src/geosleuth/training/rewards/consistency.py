"""GeoAgent's consistency reward R_con (paper Eq. 8–9): does the reasoning support the answer?

For each level i (country, region, precise place) a judge model reads only level i's
reasoning (the conclusions masked out, the coarser conclusions given as context) and
re-derives that level. Eq. 8: R_con = Σ αᵢ·pᵢ·cᵢ with α = 0.1 / 0.6 / 0.3, cᵢ = 1 when the
re-derived conclusion matches the **ground truth** of level i, and Eq. 9: pᵢ =
1/(1+exp(−λ(ℓ̂ᵢ−μ))) with ℓ̂ᵢ the min–max-normalised length of level i's reasoning.

Level i's reasoning is the ``Reasoning`` of GeoAgent's JSON chain of thought
(``CountryIdentification`` / ``RegionalGuess`` / ``PreciseLocalization`` inside ``<think>``);
for any other answer style the model's whole reasoning serves every level. ``released=True``
selects the released ``ThinkAnswerConsistency``: the re-derived conclusion is compared with
the model's own conclusion, by exact match (spaces removed), and lengths below / above the
range give exactly 0 / 1.

Requests run concurrently (bounded), identical prompts are answered once (cache), and a
judge failure or timeout counts 0 for that level with the reason logged and kept in
`ConsistencyJudge.failures`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from geosleuth.core import reward_math
from geosleuth.core.countries import country_name
from geosleuth.core.records import Prediction
from geosleuth.core.reward_math import SEMANTIC_ALPHAS, SEMANTIC_LEVELS
from geosleuth.training.rewards.rollouts import escape_example

log = logging.getLogger(__name__)

MAX_KEPT_FAILURES = 10_000
MAX_ROLLOUT_CHARS = 200_000
"""Longer rollouts are cut before the reasoning is read (bounded work on any generation)."""

_STRIP = re.compile(
    r"<(tool_response|tool_call|answer|observation)>.*?(?:</\1>|\Z)|<\|im_start\|>(?:tool|user).*?(?:<\|im_end\|>|\Z)",
    re.S | re.I,
)
_TAGS = re.compile(r"</?think>|<\|im_(?:start|end)\|>(?:assistant)?", re.I)
_JSON = re.compile(r"\{.*\}", re.S)
_THINK = re.compile(r"<think>", re.I)

_LEVEL_WORDS = {
    "country": "country",
    "region": "province / state / region",
    "precise": "city or more precise place",
}
GEOAGENT_STAGES = {
    "country": "CountryIdentification",
    "region": "RegionalGuess",
    "precise": "PreciseLocalization",
}


@dataclass(frozen=True)
class JudgeConfig:
    """Where the judge runs and how the reward is shaped (Eq. 8–9 constants as released)."""

    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)  # never in logs or reprs
    timeout_s: float = 30.0
    max_retries: int = 1
    concurrency: int = 32
    match_threshold: float = 0.8
    reference: Literal["truth", "own"] | None = None  # default: truth (paper); released: own
    exact_match: bool | None = None  # default: multilingual similarity; released: exact
    length_lambda: float = reward_math.CONSISTENCY_LAMBDA
    length_mu: float = reward_math.CONSISTENCY_MU
    length_min_chars: float = reward_math.CONSISTENCY_LENGTH_RANGE[0]
    length_max_chars: float = reward_math.CONSISTENCY_LENGTH_RANGE[1]
    length_hard_cutoff: bool | None = None  # default: plain sigmoid (paper); released: 0 / 1 outside
    released: bool = False
    cache_size: int = 100_000
    temperature: float = 0.0
    max_tokens: int = 64

    @property
    def compares_with(self) -> str:
        return self.reference or ("own" if self.released else "truth")

    @property
    def exact(self) -> bool:
        return self.released if self.exact_match is None else self.exact_match

    @property
    def hard_cutoff(self) -> bool:
        return self.released if self.length_hard_cutoff is None else self.length_hard_cutoff

    def weight(self, length: float) -> float:
        """pᵢ of Eq. 9 for a reasoning of ``length`` characters."""
        return reward_math.length_weight(
            length,
            self.length_lambda,
            self.length_mu,
            (self.length_min_chars, self.length_max_chars),
            self.hard_cutoff,
        )


@dataclass
class LevelQuery:
    """One judge request: the masked reasoning, the context given, the model's own conclusion."""

    level: str
    prompt: str
    conclusion: str
    reasoning_chars: int


@dataclass
class ConsistencyResult:
    score: float
    matches: dict[str, float] = field(default_factory=dict)
    length_weights: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def reasoning_text(rollout: str) -> str:
    """The model's own words: tool calls, tool output and the answer block removed."""
    return re.sub(r"\s+", " ", _TAGS.sub(" ", _STRIP.sub(" ", rollout[:MAX_ROLLOUT_CHARS]))).strip()


def chain_of_thought(rollout: str) -> dict[str, tuple[str, str]] | None:
    """GeoAgent's JSON chain of thought: level -> (Reasoning, Conclusion), or None if absent."""
    from geosleuth.training.rewards.batch import strip_tool_blocks

    own = strip_tool_blocks(rollout[:MAX_ROLLOUT_CHARS])
    starts = [m.end() for m in _THINK.finditer(own)] or [0]
    decoder = json.JSONDecoder()
    for start in starts:
        brace = own.find("{", start)
        if brace < 0:
            continue
        try:
            obj, _ = decoder.raw_decode(own, brace)
        except (ValueError, RecursionError):
            continue
        chain = obj.get("ChainOfThought") if isinstance(obj, dict) else None
        if not isinstance(chain, dict):
            continue
        out: dict[str, tuple[str, str]] = {}
        for level, stage in GEOAGENT_STAGES.items():
            data = chain.get(stage)
            if isinstance(data, dict):
                out[level] = (str(data.get("Reasoning") or ""), str(data.get("Conclusion") or "").strip())
        return out
    return None


def _mask(text: str, names: Sequence[str]) -> str:
    for name in sorted({n for n in names if n and len(n) > 1}, key=len, reverse=True):
        text = re.sub(re.escape(name), "[MASKED]", text, flags=re.I)
    return text


def _names(pred: Prediction | None, levels: Mapping[str, str | None], level: str) -> list[str]:
    out = [levels.get(level) or ""]
    if pred is not None and level == "country" and pred.country_code:
        out.append(country_name(pred.country_code))
    if pred is not None and level == "precise":
        out += [pred.poi or "", pred.street or "", pred.town or "", pred.city or "", pred.admin2 or ""]
        out.append(pred.place or "")  # a place of open level is masked with the finest conclusions
    return [n for n in out if n]


def _prompt(level: str, reasoning: str, context: Mapping[str, str]) -> str:
    return (
        "Below is the reasoning of someone locating a photo; their conclusions are [MASKED].\n"
        f"Reasoning:\n{reasoning}\n\n"
        + (f"Already established: {json.dumps(dict(context), ensure_ascii=False)}\n" if context else "")
        + f"Based only on this reasoning, which {_LEVEL_WORDS[level]} does it point to? "
        'Reply with JSON only: {"answer": "<name>"} or {"answer": null} if the reasoning does not say.'
    )


def level_queries(rollout: str, pred: Prediction | None = None) -> list[LevelQuery]:
    """A request per level the model concluded; that level's and finer conclusions are masked."""
    from geosleuth.training.rewards.batch import parse_rollout, rollout_levels

    chain = chain_of_thought(rollout)
    if pred is None:
        pred = parse_rollout(rollout)
    levels = dict(rollout_levels(rollout, pred))
    if chain:
        for level, (_, conclusion) in chain.items():
            levels[level] = conclusion or levels.get(level)
    whole = reasoning_text(rollout)
    queries: list[LevelQuery] = []
    for i, level in enumerate(SEMANTIC_LEVELS):
        conclusion = levels.get(level)
        reasoning = chain[level][0] if chain and level in chain else whole
        if not conclusion or not reasoning.strip():
            continue
        hidden = [n for lv in SEMANTIC_LEVELS[i:] for n in _names(pred, levels, lv)]
        context = {lv: str(levels[lv]) for lv in SEMANTIC_LEVELS[:i] if levels.get(lv)}
        queries.append(
            LevelQuery(level, _prompt(level, _mask(reasoning, hidden), context), conclusion, len(reasoning))
        )
    return queries


def judge_answer(text: str) -> str | None:
    """The judge's ``{"answer": …}`` (or GeoAgent's ``{"Conclusion": …}``); plain text is the answer."""
    m = _JSON.search(text or "")
    if m:
        try:
            obj = json.loads(m.group(0))
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            value = obj.get("answer", obj.get("Conclusion"))
            return str(value).strip() if value else None
    stripped = (text or "").strip()
    return stripped or None


def truth_levels(truth: Any) -> dict[str, str | None]:
    """Country / region / precise place of a ground truth (a `GroundTruth` or anything it parses from)."""
    from geosleuth.training.rewards.reading import truth_semantic
    from geosleuth.training.rewards.truth import parse_ground_truth

    return truth_semantic(parse_ground_truth(truth))


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

    async def score_batch(
        self, rollouts: Sequence[str], truths: Sequence[Any] | None = None
    ) -> list[ConsistencyResult]:
        """R_con of each rollout; every request of the batch runs concurrently.

        ``truths`` (ground truths, as the rewards accept them) are needed when the conclusions
        are compared with the truth (the paper's default); without them every level scores 0.
        """
        from geosleuth.agent.client import ChatClient

        if truths is not None and len(truths) != len(rollouts):
            raise ValueError(f"{len(rollouts)} rollouts but {len(truths)} ground truths")
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
        for i, plan in enumerate(plans):
            refs = truth_levels(truths[i]) if truths is not None else {}
            results.append(self._combine(i, plan, [by_prompt[q.prompt] for q in plan], refs))
        failed = [r.errors[0] for r in results if r.errors]
        if failed:  # one line per batch; each failed level is at DEBUG
            log.warning(
                "consistency judge: %d of %d rollouts had a failed judge request (first: %s)",
                len(failed),
                len(results),
                escape_example(failed[0]),
            )
        return results

    def _matches(self, answer: str, query: LevelQuery, refs: Mapping[str, str | None]) -> float:
        reference = query.conclusion if self.config.compares_with == "own" else refs.get(query.level)
        if not answer or not reference:
            return 0.0
        if self.config.exact:
            return 1.0 if answer.replace(" ", "") == reference.strip().replace(" ", "") else 0.0
        from geosleuth.training.rewards.similarity import multilingual_similarity

        return (
            1.0
            if multilingual_similarity(answer, reference, query.level) >= self.config.match_threshold
            else 0.0
        )

    def _combine(
        self,
        index: int,
        plan: list[LevelQuery],
        answers: list[tuple[str | None, str | None]],
        refs: Mapping[str, str | None],
    ) -> ConsistencyResult:
        result = ConsistencyResult(0.0)
        matches = dict.fromkeys(SEMANTIC_LEVELS, 0.0)
        lengths = dict.fromkeys(SEMANTIC_LEVELS, 0.0)
        for query, (answer, error) in zip(plan, answers, strict=True):
            lengths[query.level] = float(query.reasoning_chars)
            if error is not None:
                reason = f"rollout {index} level {query.level}: judge failed ({error}); counted 0"
                log.debug(reason)
                self.failures.append({"rollout": str(index), "level": query.level, "reason": error})
                result.errors.append(reason)
                continue
            matches[query.level] = self._matches(answer or "", query, refs)
        result.matches = {q.level: matches[q.level] for q in plan}
        result.length_weights = {q.level: self.config.weight(lengths[q.level]) for q in plan}
        result.score = reward_math.consistency_reward(
            [matches[lv] for lv in SEMANTIC_LEVELS],
            [lengths[lv] for lv in SEMANTIC_LEVELS],
            SEMANTIC_ALPHAS,
            self.config.length_lambda,
            self.config.length_mu,
            (self.config.length_min_chars, self.config.length_max_chars),
            self.config.hard_cutoff,
        )
        return result

    async def score_texts(self, rollouts: Sequence[str], truths: Sequence[Any] | None = None) -> list[float]:
        return [r.score for r in await self.score_batch(rollouts, truths)]

    def score_texts_sync(self, rollouts: Sequence[str], truths: Sequence[Any] | None = None) -> list[float]:
        """For synchronous callers (verl's reward managers, TRL sync rewards); safe inside a running loop."""
        from geosleuth.training.rewards.geocoding import run_sync

        return run_sync(lambda: self.score_texts(rollouts, truths))
