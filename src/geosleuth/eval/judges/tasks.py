"""LLM-as-a-judge over a finished run, through the same OpenAI-compatible client as the agent.

Judges: level-wise correctness (judge booleans with the hierarchy fix-up, kept next to the
rule-based match), hierarchical path score, key-clue usage, Shapley clue weights and
WhereBench's error taxonomy (App. D). With human labels beside the run (``human_labels.jsonl``)
the summary gives each judge's Cohen's κ against them (WhereBench App. B). Prompts
are data files in ``prompts/``. Every judge call is cached by its exact request and
every judgment, failures included, is appended to ``judgments.jsonl``: a judge failure is a
recorded miss, never a dropped sample.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import string
import threading
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, TypeVar

import numpy as np
from pydantic import BaseModel, ValidationError, field_validator

from geosleuth.core import metrics
from geosleuth.core.records import Sample, Trajectory, TrajectoryStatus
from geosleuth.eval.judges.catalog import JUDGES
from geosleuth.eval.run.config import JudgeSettings

if TYPE_CHECKING:
    from geosleuth.agent.client import ChatClient

JUDGMENTS = "judgments.jsonl"
JUDGE_CACHE = "judge_cache.sqlite"
JUDGE_LEVELS: dict[str, str] = {"country": "country", "admin1": "state", "city": "city"}
MAX_SHAPLEY_CLUES = 8


class JudgeError(Exception):
    """The judge did not produce a usable verdict."""


@cache
def prompt_template(name: str) -> string.Template:
    """A judge prompt file (``$name`` placeholders, so JSON braces need no escaping)."""
    text = (
        resources.files("geosleuth.eval.judges").joinpath("prompts", f"{name}.md").read_text(encoding="utf-8")
    )
    return string.Template(text)


def render(name: str, **values: Any) -> str:
    return prompt_template(name).safe_substitute({k: "" if v is None else v for k, v in values.items()})


def first_json_object(text: str) -> dict[str, Any]:
    """The first JSON object in a reply (code fences and chatter around it are ignored)."""
    decoder = json.JSONDecoder()
    for start, char in enumerate(text):
        if char != "{":
            continue
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    raise JudgeError(f"no JSON object in judge reply: {text[:200]!r}")


VerdictT = TypeVar("VerdictT", bound=BaseModel)


class LevelVerdict(BaseModel):
    country: bool
    state: bool
    city: bool


class PathVerdict(BaseModel):
    levels: dict[str, bool]
    copied_hint: bool = False


class ClueVerdict(BaseModel):
    used: list[bool]


class QualityVerdict(BaseModel):
    quality: float

    @field_validator("quality")
    @classmethod
    def _in_range(cls, value: float) -> float:
        if not 0.0 <= value <= 1.0:
            raise ValueError("quality must lie in [0, 1]")
        return value


ERROR_CATEGORIES = ("missed_visual_clues", "overthinking", "incomplete_search", "other", "correct")
"""WhereBench App. D's error taxonomy, with "other" and "correct" so that every answer has one."""
HUMAN_LABELS = "human_labels.jsonl"
"""Human labels beside a run: one JSON object per line, ``sample_id``, ``judge`` and the judge's
own fields (``country``/``state``/``city`` booleans for levels, ``error`` for errors, ``used``
for clues, ``score`` for path)."""


class ErrorVerdict(BaseModel):
    error: Literal["missed_visual_clues", "overthinking", "incomplete_search", "other", "correct"]
    reason: str = ""


def parse_verdict(model: type[VerdictT], text: str) -> VerdictT:
    try:
        return model.model_validate(first_json_object(text))
    except ValidationError as exc:
        raise JudgeError(f"judge reply does not match {model.__name__}: {exc.errors()[0]['msg']}") from exc


class JudgeCache:
    """SQLite cache of judge replies keyed by the exact request (model + messages)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
        self._db.commit()

    @staticmethod
    def key(model: str, messages: list[dict[str, Any]], temperature: float) -> str:
        blob = json.dumps([model, messages, temperature], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def put(self, key: str, reply: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO replies VALUES (?, ?)", (key, reply))
            self._db.commit()

    def close(self) -> None:
        self._db.close()


AskFn = Callable[[str], Awaitable[tuple[str, bool]]]


def _chat_client(settings: JudgeSettings) -> ChatClient:
    """The judge model's endpoint (imported here: judging is optional and the client pulls in httpx)."""
    from geosleuth.agent.client import ChatClient

    return ChatClient(
        settings.model,
        settings.base_url,
        api_key_env=settings.api_key_env or "OPENAI_API_KEY",
        timeout_s=settings.timeout_s,
        max_retries=settings.max_retries,
        backoff_s=0.05,
    )


class Judge:
    """Asks the judge model one prompt at a time, with cache and bounded concurrency."""

    def __init__(self, settings: JudgeSettings, cache_path: Path) -> None:
        self.settings = settings
        self.client = _chat_client(settings)
        self.cache = JudgeCache(cache_path)
        self._slots = asyncio.Semaphore(settings.concurrency)

    async def ask(self, prompt: str) -> tuple[str, bool]:
        """The reply text and whether it came from the cache."""
        messages = [{"role": "user", "content": prompt}]
        key = JudgeCache.key(self.settings.model, messages, self.settings.temperature)
        cached = await asyncio.to_thread(self.cache.get, key)  # SQLite: off the event loop
        if cached is not None:
            return cached, True
        async with self._slots:
            response = await self.client.complete(messages, temperature=self.settings.temperature)
        text = response.first.content
        await asyncio.to_thread(self.cache.put, key, text)
        return text, False

    async def close(self) -> None:
        await self.client.aclose()
        self.cache.close()


@dataclass
class Judgment:
    """One judge verdict about one sample, as recorded in ``judgments.jsonl``."""

    sample_id: str
    judge: str
    ok: bool
    result: dict[str, Any]
    error: str | None = None
    raw: list[str] | None = None
    cached: bool = False

    def to_json(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False)


def answer_text(trajectory: Trajectory | None) -> str:
    """What the model answered (its final text), for judges that read answers."""
    if trajectory is None or trajectory.status != TrajectoryStatus.OK or trajectory.prediction is None:
        return ""
    return trajectory.prediction.raw or trajectory.prediction.address or ""


def reasoning_text(trajectory: Trajectory | None) -> str:
    if trajectory is None:
        return ""
    parts = [p for t in trajectory.turns for p in (t.reasoning, t.text) if p]
    return "\n".join(parts)


def _rule_levels(sample: Sample, trajectory: Trajectory | None) -> dict[str, bool]:
    levels = [lv for lv in JUDGE_LEVELS if sample.labels.get(lv)]
    prediction = trajectory.prediction if trajectory and trajectory.status == TrajectoryStatus.OK else None
    predicted = {lv: [prediction.level(lv) if prediction else None] for lv in levels}
    hits = metrics.level_hits_from_text(predicted, {lv: [sample.labels[lv]] for lv in levels}, levels=levels)
    return {lv: bool(hits[lv][0]) for lv in levels}


async def _level_verdict(
    sample: Sample, answer: str, ask: AskFn
) -> tuple[LevelVerdict | JudgeError, str, bool]:
    """The judge's per-level booleans for ``answer`` (or why they could not be read), its raw
    reply and whether that reply came from the cache."""
    prompt = render(
        "levels", answer=answer, **{lv: sample.labels.get(lv, "(not given)") for lv in JUDGE_LEVELS}
    )
    raw, cached = await ask(prompt)
    try:
        return parse_verdict(LevelVerdict, raw), raw, cached
    except JudgeError as exc:
        return exc, raw, cached


async def judge_levels(sample: Sample, trajectory: Trajectory | None, ask: AskFn) -> Judgment:
    """Judge booleans per level, fixed up so a correct finer level implies the coarser ones."""
    rule = _rule_levels(sample, trajectory)
    answer = answer_text(trajectory)
    miss = dict.fromkeys(rule, False)
    if not answer:
        return Judgment(
            sample.id, "levels", True, {"rule": rule, "judge": miss, "combined": rule}, "no answer"
        )
    verdict, raw, cached = await _level_verdict(sample, answer, ask)
    if isinstance(verdict, JudgeError):
        result = {"rule": rule, "judge": miss, "combined": rule}
        return Judgment(sample.id, "levels", False, result, str(verdict), [raw], cached)
    said = {lv: bool(getattr(verdict, name)) for lv, name in JUDGE_LEVELS.items()}
    fixed = metrics.imply_coarser({lv: np.array([v]) for lv, v in said.items()}, order=tuple(JUDGE_LEVELS))
    judged = {lv: bool(fixed[lv][0]) for lv in rule}
    combined = {lv: rule[lv] or judged[lv] for lv in rule}
    return Judgment(
        sample.id, "levels", True, {"rule": rule, "judge": judged, "combined": combined}, None, [raw], cached
    )


async def judge_levels_geovista(sample: Sample, trajectory: Trajectory | None, ask: AskFn) -> Judgment:
    """GeoVista's released verifier: the judge's verdict replaces the whole-term rule.

    ``eval/utils_level_wise_eval.py`` (ekonwang/GeoVista) computes the rule, then with
    ``--model_verifier`` uses the model's booleans alone, fixed up so a finer level implies the
    coarser ones. A row without an answer, or whose verification fails, is dropped there; here
    it is recorded (``ok`` false on failure) and counts as a miss.
    """
    from geosleuth.scoring import geovista

    levels = [lv for lv in JUDGE_LEVELS if sample.labels.get(lv)]
    response = geovista.final_turn(answer_text(trajectory))
    rule_all = geovista.rule_levels(response, sample.labels) if response else {}
    rule = {lv: bool(rule_all.get(lv)) for lv in levels}
    miss = dict.fromkeys(levels, False)
    if not response:
        result = {"rule": rule, "judge": miss, "combined": miss}
        return Judgment(sample.id, "levels", True, result, "no answer")
    verdict, raw, cached = await _level_verdict(sample, response, ask)
    if isinstance(verdict, JudgeError):
        result = {"rule": rule, "judge": miss, "combined": miss}
        return Judgment(sample.id, "levels", False, result, str(verdict), [raw], cached)
    said = {"country": verdict.country, "admin1": verdict.state, "city": verdict.city}
    judged_all = geovista.verifier_levels(said)
    judged = {lv: judged_all[lv] for lv in levels}
    result = {"rule": rule, "judge": judged, "combined": dict(judged)}
    return Judgment(sample.id, "levels", True, result, None, [raw], cached)


class GeoVistaVerifier:
    """GeoVista's ``--model_verifier`` for ``geosleuth score``: one judge call per answer, in order.

    Called as ``verifier(final_turn, labels) -> {country, admin1, city}``; an unusable reply
    raises, and the scorer drops the row as the released code does (listing it).
    """

    def __init__(self, settings: JudgeSettings) -> None:
        self.settings = settings
        self._runner = asyncio.Runner()
        self._client = _chat_client(settings)

    def __call__(self, response: str, labels: Mapping[str, str]) -> dict[str, bool]:
        prompt = render(
            "levels", answer=response, **{lv: labels.get(lv) or "(not given)" for lv in JUDGE_LEVELS}
        )
        messages = [{"role": "user", "content": prompt}]
        reply = self._runner.run(self._client.complete(messages, temperature=self.settings.temperature))
        verdict = parse_verdict(LevelVerdict, reply.first.content or "")
        return {"country": verdict.country, "admin1": verdict.state, "city": verdict.city}

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()


async def judge_path(sample: Sample, trajectory: Trajectory | None, ask: AskFn) -> Judgment:
    """WhereStreet path score from judged level correctness along the hierarchy."""
    level = sample.answer_level or "city"
    path = [lv for lv in metrics.PATH_LEVELS if sample.labels.get(lv)]
    answer = answer_text(trajectory)
    if not answer:
        return Judgment(sample.id, "path", True, {"score": 0.0, "levels": {}}, "no answer")
    truth = json.dumps({lv: sample.labels[lv] for lv in path}, ensure_ascii=False)
    raw, cached = await ask(render("path", hint=sample.hint or "(none)", truth=truth, answer=answer))
    try:
        verdict = parse_verdict(PathVerdict, raw)
    except JudgeError as exc:
        return Judgment(sample.id, "path", False, {"score": 0.0, "levels": {}}, str(exc), [raw], cached)
    present = tuple(path)  # levels the truth lacks cannot be checked and are not on the path
    score = metrics.path_score(verdict.levels, level, sample.hint_level, verdict.copied_hint, order=present)
    result = {"score": score, "levels": verdict.levels, "copied_hint": verdict.copied_hint}
    return Judgment(sample.id, "path", True, result, None, [raw], cached)


async def judge_clues(sample: Sample, trajectory: Trajectory | None, ask: AskFn) -> Judgment:
    """Which key clues the reasoning uses, and the (Shapley-weighted) thinking score."""
    n = len(sample.key_clues)
    reasoning = reasoning_text(trajectory)
    weights = sample.clue_weights or None
    if not reasoning:
        return Judgment(sample.id, "clues", True, {"used": [False] * n, "score": 0.0}, "no reasoning")
    clues = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(sample.key_clues))
    raw, cached = await ask(render("clues", clues=clues, reasoning=reasoning))
    try:
        verdict = parse_verdict(ClueVerdict, raw)
        if len(verdict.used) != n:
            raise JudgeError(f"judge returned {len(verdict.used)} verdicts for {n} clues")
    except JudgeError as exc:
        return Judgment(
            sample.id, "clues", False, {"used": [False] * n, "score": 0.0}, str(exc), [raw], cached
        )
    score = metrics.thinking_score(verdict.used, weights)
    return Judgment(sample.id, "clues", True, {"used": verdict.used, "score": score}, None, [raw], cached)


async def judge_shapley(sample: Sample, ask: AskFn) -> Judgment:
    """Exact Shapley weights of the key clues from judged answer quality of every clue subset."""
    n = len(sample.key_clues)
    if n > MAX_SHAPLEY_CLUES:
        return Judgment(
            sample.id, "shapley", False, {}, f"{n} clues: exact Shapley capped at {MAX_SHAPLEY_CLUES}"
        )
    answer = sample.answer or ", ".join(
        sample.labels[lv] for lv in metrics.PATH_LEVELS if sample.labels.get(lv)
    )
    subsets = [
        frozenset(int(i) for i in np.flatnonzero([(mask >> j) & 1 for j in range(n)])) for mask in range(2**n)
    ]
    values: dict[frozenset[int], float] = {frozenset(): 0.0}
    raws: list[str] = []
    cached_all = True

    async def value_of(subset: frozenset[int]) -> None:
        nonlocal cached_all
        clues = "\n".join(f"- {sample.key_clues[i]}" for i in sorted(subset))
        raw, cached = await ask(render("shapley", answer=answer, clues=clues))
        raws.append(raw)
        cached_all = cached_all and cached
        values[subset] = parse_verdict(QualityVerdict, raw).quality

    try:
        await asyncio.gather(*(value_of(s) for s in subsets if s))
    except JudgeError as exc:
        return Judgment(sample.id, "shapley", False, {}, str(exc), raws, cached_all)
    phi = metrics.shapley_values(lambda s: values[s], n)
    result = {"values": [float(v) for v in phi], "full_quality": values[frozenset(range(n))]}
    return Judgment(sample.id, "shapley", True, result, None, raws, cached_all)


def _truth_text(sample: Sample) -> str:
    levels = [f"- {lv}: {sample.labels[lv]}" for lv in metrics.PATH_LEVELS if sample.labels.get(lv)]
    if sample.lat is not None and sample.lon is not None:
        levels.append(f"- coordinates: {sample.lat:.5f}, {sample.lon:.5f}")
    return "\n".join(levels) or "(not given)"


def _trace_text(trajectory: Trajectory | None) -> str:
    """Each turn's reasoning and text, and its tool calls with their results (cut to 500 characters)."""
    if trajectory is None:
        return ""
    parts: list[str] = []
    for turn in trajectory.turns:
        parts += [p for p in (turn.reasoning, turn.text) if p]
        for call in turn.tool_calls:
            result = (call.result_text or call.error or "")[:500]
            parts.append(f"[tool {call.name} {json.dumps(call.arguments, ensure_ascii=False)}] {result}")
    return "\n".join(parts)


async def judge_errors(sample: Sample, trajectory: Trajectory | None, ask: AskFn) -> Judgment:
    """WhereBench's error taxonomy: the category that best explains a wrong answer."""
    answer = answer_text(trajectory)
    if not answer:
        return Judgment(sample.id, "errors", True, {"error": "no_answer"}, "no answer")
    raw, cached = await ask(
        render("errors", truth=_truth_text(sample), answer=answer, reasoning=_trace_text(trajectory))
    )
    try:
        verdict = parse_verdict(ErrorVerdict, raw)
    except JudgeError as exc:
        return Judgment(sample.id, "errors", False, {"error": None}, str(exc), [raw], cached)
    result = {"error": verdict.error, "reason": verdict.reason}
    return Judgment(sample.id, "errors", True, result, None, [raw], cached)


def judge_labels(task: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """A judgment's labels by field, in the shape human labels are written (``HUMAN_LABELS``)."""
    if task == "levels":
        judged = result.get("judge") or {}
        return {name: judged[lv] for lv, name in JUDGE_LEVELS.items() if lv in judged}
    if task == "clues":
        return {f"used.{i}": bool(u) for i, u in enumerate(result.get("used") or [])}
    if task == "path":
        return {"score": result.get("score")}
    if task == "errors":
        return {"error": result.get("error")}
    return {}


def read_human_labels(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Human labels by (sample id, judge), flattened like `judge_labels`; bad lines are skipped."""
    path = run_dir / HUMAN_LABELS
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if not path.exists():
        return out
    with path.open("rb") as handle:
        for line in handle:
            try:
                record = json.loads(line)
                key = (str(record.pop("sample_id")), str(record.pop("judge")))
            except (ValueError, KeyError, AttributeError, TypeError):
                continue
            used = record.pop("used", None)
            if isinstance(used, list):
                record |= {f"used.{i}": bool(u) for i, u in enumerate(used)}
            out[key] = record
    return out


def human_agreement(
    judgments: Mapping[tuple[str, str], Mapping[str, Any]], human: Mapping[tuple[str, str], Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """Per judge task, Cohen's κ of the judge's labels against the human ones over every
    (sample, field) both gave, and how many pairs that is."""
    pairs: dict[str, tuple[list[Any], list[Any]]] = {}
    for key, labels in human.items():
        record = judgments.get(key)
        if record is None or not record.get("ok"):
            continue
        said = judge_labels(key[1], record.get("result") or {})
        for field, value in labels.items():
            if field in said and said[field] is not None:
                judge_side, human_side = pairs.setdefault(key[1], ([], []))
                judge_side.append(said[field])
                human_side.append(value)
    return {
        task: {"kappa": round(metrics.cohen_kappa(a, b), 6), "pairs": len(a)}
        for task, (a, b) in pairs.items()
    }


def read_judgments(run_dir: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Recorded judgments by (sample id, judge); a torn last line is ignored."""
    path = run_dir / JUDGMENTS
    out: dict[tuple[str, str], dict[str, Any]] = {}
    if not path.exists():
        return out
    with path.open("rb") as handle:  # a line that is not UTF-8 or not JSON is skipped alone
        for line in handle:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            out[(record["sample_id"], record["judge"])] = record
    return out


@dataclass(frozen=True)
class JudgeTask:
    """One judge: the samples it applies to, how it asks, and what a failed ask records."""

    name: str
    judge: Callable[[Sample, Trajectory | None, AskFn, str | None], Awaitable[Judgment]]
    """(sample, trajectory, ask, the run's protocol) -> the judgment."""
    applies: Callable[[Sample], bool]
    on_error: Callable[[Sample, Trajectory | None], dict[str, Any]] = lambda sample, trajectory: {}
    """The values recorded beside a failed ask (the rule-based part of a judgment, if any)."""


@JUDGES.validator
def _as_judge(name: str, value: Any) -> JudgeTask:
    if not isinstance(value, JudgeTask):
        raise TypeError(f"a judge is a geosleuth JudgeTask, got {type(value).__name__}")
    return value


async def _levels(
    sample: Sample, trajectory: Trajectory | None, ask: AskFn, protocol: str | None
) -> Judgment:
    if protocol == "geovista":  # GeoVista's released verifier reads the whole final turn
        return await judge_levels_geovista(sample, trajectory, ask)
    return await judge_levels(sample, trajectory, ask)


def _levels_on_error(sample: Sample, trajectory: Trajectory | None) -> dict[str, Any]:
    rule = _rule_levels(sample, trajectory)
    return {"rule": rule, "judge": dict.fromkeys(rule, False), "combined": rule}


def _has_clues(sample: Sample) -> bool:
    return bool(sample.key_clues)


for _task in (
    JudgeTask(
        "levels",
        _levels,
        lambda s: any(s.labels.get(lv) for lv in JUDGE_LEVELS) and s.answer_type != "choice",
        _levels_on_error,
    ),
    JudgeTask("path", lambda s, t, ask, p: judge_path(s, t, ask), lambda s: s.answer_type == "level"),
    JudgeTask("clues", lambda s, t, ask, p: judge_clues(s, t, ask), _has_clues),
    JudgeTask("shapley", lambda s, t, ask, p: judge_shapley(s, ask), _has_clues),
    JudgeTask(
        "errors",  # WhereBench's error taxonomy (App. D)
        lambda s, t, ask, p: judge_errors(s, t, ask),
        lambda s: bool(s.labels) or s.lat is not None,
    ),
):
    JUDGES.register(_task.name, _task)


def _applies(task: str, sample: Sample) -> bool:
    return JUDGES.get_entry(task).applies(sample)


async def _judge_one(
    task: str, sample: Sample, trajectory: Trajectory | None, judge: Judge, protocol: str | None = None
) -> Judgment:
    chosen = JUDGES.get_entry(task)
    try:
        return await chosen.judge(sample, trajectory, judge.ask, protocol)
    except Exception as exc:  # a judge endpoint failure is a recorded judgment, not a crash
        empty = chosen.on_error(sample, trajectory)
        return Judgment(sample.id, task, False, empty, f"{type(exc).__name__}: {exc}")


async def run_judges(
    run_dir: Path,
    samples: Sequence[Sample],
    trajectories: dict[str, Trajectory],
    settings: JudgeSettings,
    tasks: Sequence[str] | None = None,
    protocol: str | None = None,
) -> int:
    """Judge every (sample, task) not yet judged; returns how many judgments were added.

    Under the ``geovista`` protocol (given, or read from the run's ``run.json``) the level
    judge's verdict replaces the rule, as GeoVista's released verifier does.
    """
    protocol = protocol or _run_protocol(run_dir)
    done = {k for k, v in read_judgments(run_dir).items() if v.get("ok")}
    todo = [
        (t, s) for t in (tasks or settings.tasks) for s in samples if _applies(t, s) and (s.id, t) not in done
    ]
    if not todo:
        return 0
    judge = Judge(settings, run_dir / JUDGE_CACHE)
    try:
        with (run_dir / JUDGMENTS).open("a", encoding="utf-8") as handle:
            for next_done in asyncio.as_completed(
                [_judge_one(t, s, trajectories.get(s.id), judge, protocol) for t, s in todo]
            ):
                judgment = await next_done
                await asyncio.to_thread(_append_durably, handle, judgment.to_json() + "\n")
    finally:
        await judge.close()
    return len(todo)


def judge_outcome(run_dir: Path, samples: Sequence[Sample], tasks: Sequence[str]) -> tuple[str, bool]:
    """What the judges named have recorded, in words, and whether every one of them has a
    usable verdict: per judge, verdicts that stand and failures; a judge that applies to no
    sample (``clues`` / ``shapley`` without key clues, ``path`` without level answers) is named
    as not run, never left out silently."""
    recorded = read_judgments(run_dir)
    parts, complete = [], True
    for task in dict.fromkeys(tasks):
        wanted = [s.id for s in samples if _applies(task, s)]
        if not wanted:
            parts.append(f"{task}: not run ({_NOT_APPLICABLE.get(task, 'no sample it applies to')})")
            complete = False
            continue
        ok = sum(1 for sid in wanted if (recorded.get((sid, task)) or {}).get("ok"))
        failed = len(wanted) - ok
        parts.append(f"{task}: {ok} of {len(wanted)} judged" + (f", {failed} failed" if failed else ""))
        complete = complete and not failed
    note = "" if complete else f" (failures and items not judged: see {run_dir / JUDGMENTS})"
    return "judges " + "; ".join(parts) + note, complete


_NOT_APPLICABLE = {
    "levels": "no sample has a country / admin1 / city label",
    "path": "no sample asks for a level answer (WhereStreet)",
    "clues": "no sample has key clues",
    "shapley": "no sample has key clues",
}


def _run_protocol(run_dir: Path) -> str | None:
    """The scoring protocol recorded in ``run.json`` (None when absent or unreadable)."""
    try:
        config = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    found = config.get("protocol") if isinstance(config, dict) else None
    if found is None and isinstance(config, dict) and isinstance(config.get("config"), dict):
        found = config["config"].get("protocol")
    return found if isinstance(found, str) else None


def _append_durably(handle: IO[str], line: str) -> None:
    handle.write(line)
    handle.flush()
    os.fsync(handle.fileno())


def judge_summary(run_dir: Path) -> dict[str, Any]:
    """Aggregates of recorded judgments; failures count as misses and are counted."""
    by_task: dict[str, list[dict[str, Any]]] = {}
    recorded = read_judgments(run_dir)
    for (_, task), record in sorted(recorded.items()):
        by_task.setdefault(task, []).append(record)
    out: dict[str, Any] = {}
    for task, records in by_task.items():
        entry: dict[str, Any] = {"n": len(records), "failed": sum(not r["ok"] for r in records)}
        if task == "levels":
            for kind in ("rule", "judge", "combined"):
                for lv in JUDGE_LEVELS:
                    hits = [r["result"][kind][lv] for r in records if lv in r["result"].get(kind, {})]
                    if hits:
                        entry[f"{lv}_acc_{kind}"] = round(float(np.mean(hits)), 6)
        elif task in ("path", "clues"):
            scores = [float(r["result"].get("score") or 0.0) for r in records]
            entry["mean_score"] = round(float(np.mean(scores)), 6)
        elif task == "errors":
            found = [str(r["result"].get("error")) for r in records if r["ok"]]
            entry["shares"] = {c: round(found.count(c) / len(found), 6) for c in sorted(set(found))}
        else:
            entry["estimated"] = sum(bool(r["ok"]) for r in records)
        out[task] = entry
    for task, agreement in human_agreement(recorded, read_human_labels(run_dir)).items():
        out.setdefault(task, {})["human_agreement"] = agreement
    return out
