"""Parallel test-time scaling: aggregate N independent trajectories into one answer.

Two aggregators. `medoid_aggregate` is model-free: the geodesic medoid of the largest
cluster of predicted coordinates, with the cluster's share of all samples as confidence.
`verify` asks an LLM verifier that sees the image, the task and each trajectory's evidence
and answer. The verifier can never see ground truth or anything scored against it: it is
given a `Task` (which has no ground-truth fields) and `verifier_view` of each trajectory,
an allow-list of what the agent itself produced; trajectory metadata, where evaluation keeps
distances and rewards, is never read.

Two views. ``evidence`` (geosleuth's own): tool calls with results cut to 800 characters and
the end of the final turn. ``full`` (Thinking with Map §3.3: the verifier is fed "the set of
Thinking with Map trajectories, together with the original image"): every turn's reasoning,
text, tool calls and results, and the images the tools returned, fitted to a token budget
(``VERIFIER_BUDGET_TOKENS`` for all candidates together, counted as 4 characters a token, at
most ``MAX_VERIFIER_IMAGES`` tool images).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np

from geosleuth.agent.client import ChatClient, ModelError, looks_like_image_rejection
from geosleuth.agent.images import PreparedImage
from geosleuth.agent.observer import Observation
from geosleuth.agent.prompting import common, load_style, render, task_extra, verifier_prompt
from geosleuth.agent.workers import DEFAULT_PARSE_TIMEOUT_S, ParseTimeout, bounded
from geosleuth.core.geo import haversine_km
from geosleuth.core.parsing import parse_answer
from geosleuth.core.records import ParseStatus, Prediction, Task, Trajectory

_ANSWER_FIELDS = (
    "lat",
    "lon",
    "country",
    "admin1",
    "city",
    "admin2",
    "town",
    "street",
    "poi",
    "address",
    "choice",
)
_RESULT_CHARS = 800
_ANSWER_CHARS = 1500
VerifierView = Literal["full", "evidence"]
VERIFIER_BUDGET_TOKENS = 32_768
"""Text the ``full`` view gives the verifier, all candidates together (4 characters a token)."""
CHARS_PER_TOKEN = 4
MAX_VERIFIER_IMAGES = 16
"""Tool-returned images the ``full`` view attaches, earliest turns of each candidate first."""
_FIT_CAPS = (None, 4000, 1500, 600, 200)  # per text field, tried in turn until a candidate fits


def agreement_confidence(agreeing: int, total: int) -> float:
    """Laplace's rule of succession, (k + 1) / (n + 2): k of n samples agreeing is evidence, not
    certainty; two of two give 0.75, never 1.0 (samples of one model share its mistakes)."""
    return round((agreeing + 1) / (total + 2), 3)


def medoid_aggregate(trajectories: list[Trajectory], radius_km: float = 25.0) -> Prediction | None:
    """Geodesic medoid of the largest cluster (points within ``radius_km`` of a centre).

    The radius is the cluster's spread, but never less than what the samples themselves claim
    (their median radius) or, when they claim none, ``radius_km / sqrt(k)``: samples that agree
    to the metre on a city centre know the city, not the metre.
    """
    preds = [t.prediction for t in trajectories if t.prediction is not None and t.prediction.has_coords]
    if not preds:
        return None
    lat = np.array([p.lat for p in preds], dtype=float)
    lon = np.array([p.lon for p in preds], dtype=float)
    dist = haversine_km(lat[:, None], lon[:, None], lat[None, :], lon[None, :])
    close = dist <= radius_km
    sizes = close.sum(axis=1)
    spread = np.where(close, dist, 0.0).sum(axis=1)
    centre = int(np.lexsort((spread, -sizes))[0])
    members = np.flatnonzero(close[centre])
    within = dist[np.ix_(members, members)].sum(axis=1)
    medoid = int(members[int(np.argmin(within))])
    chosen = preds[medoid]
    own = sorted(p.radius_km for p in (preds[i] for i in members) if p.radius_km)
    floor = own[len(own) // 2] if own else radius_km / math.sqrt(len(members))
    radius = max(float(dist[medoid, members].max()), floor)
    return chosen.model_copy(
        update={
            "confidence": agreement_confidence(len(members), len(trajectories)),
            "radius_km": round(radius, 3),
            "coords_source": "aggregate",
            "evidence": [
                *chosen.evidence,
                f"{len(members)} of {len(trajectories)} samples within {radius_km:g} km (geodesic medoid)",
            ],
        }
    )


def majority_choice(trajectories: list[Trajectory]) -> Prediction | None:
    """The most frequent choice letter (first seen wins ties): multiple-choice answers have no coordinates."""
    preds = [t.prediction for t in trajectories if t.prediction is not None and t.prediction.choice]
    if not preds:
        return None
    votes = Counter(p.choice for p in preds)
    winner, count = votes.most_common(1)[0]
    chosen = next(p for p in preds if p.choice == winner)
    return chosen.model_copy(
        update={
            "confidence": agreement_confidence(count, len(trajectories)),
            "evidence": [*chosen.evidence, f"{count} of {len(trajectories)} samples chose {winner}"],
        }
    )


def verifier_view(trajectory: Trajectory) -> dict[str, Any]:
    """What the verifier may read of a trajectory: the agent's own evidence and answer, nothing else."""
    evidence = []
    for turn in trajectory.turns:
        for call in turn.tool_calls:
            evidence.append(
                {
                    "tool": call.name,
                    "arguments": call.arguments,
                    "ok": call.ok,
                    "result": (call.result_text or call.error or "")[:_RESULT_CHARS],
                }
            )
    answer: dict[str, Any] = {}
    if trajectory.prediction is not None:
        answer = {
            k: getattr(trajectory.prediction, k) for k in _ANSWER_FIELDS if getattr(trajectory.prediction, k)
        }
    final_text = trajectory.turns[-1].text[-_ANSWER_CHARS:] if trajectory.turns else ""
    return {"evidence": evidence, "answer": answer, "final_text": final_text}


def _cut(text: str | None, cap: int | None) -> str:
    """``text`` within ``cap`` characters, its head and tail kept (the start states the plan,
    the end the conclusion)."""
    text = text or ""
    if cap is None or len(text) <= cap:
        return text
    half = cap // 2
    return f"{text[:half]} …[{len(text) - 2 * half} characters cut]… {text[-half:]}"


def _answer(trajectory: Trajectory) -> dict[str, Any]:
    p = trajectory.prediction
    return {} if p is None else {k: getattr(p, k) for k in _ANSWER_FIELDS if getattr(p, k)}


def _full_turns(trajectory: Trajectory, cap: int | None) -> list[dict[str, Any]]:
    turns = []
    for turn in trajectory.turns:
        entry: dict[str, Any] = {"turn": turn.index}
        if turn.reasoning:
            entry["reasoning"] = _cut(turn.reasoning, cap)
        entry["text"] = _cut(turn.text, cap)
        if turn.tool_calls:
            entry["tool_calls"] = [
                {
                    "tool": c.name,
                    "arguments": c.arguments,
                    "ok": c.ok,
                    "result": _cut(c.result_text or c.error or "", cap),
                    **({"images": len(c.result_images)} if c.result_images else {}),
                }
                for c in turn.tool_calls
            ]
        turns.append(entry)
    return turns


def full_view(trajectory: Trajectory, budget_chars: int) -> dict[str, Any]:
    """The whole trajectory as Thinking with Map's verifier reads it, within ``budget_chars``
    of JSON: every field whole when it fits, else each text field cut to a smaller cap, else
    the middle turns left out (the first and last kept, the omission stated)."""
    answer = _answer(trajectory)
    view: dict[str, Any] = {}
    for cap in _FIT_CAPS:
        view = {"turns": _full_turns(trajectory, cap), "answer": answer}
        if len(json.dumps(view, ensure_ascii=False)) <= budget_chars:
            return view
    turns = view["turns"]
    while len(turns) > 2 and len(json.dumps(view, ensure_ascii=False)) > budget_chars:
        turns.pop(len(turns) // 2)
        view["omitted_turns"] = len(trajectory.turns) - len(turns)
    return view


def tool_image_refs(trajectory: Trajectory) -> list[str]:
    """The images the tools returned, in the order the agent saw them."""
    return [ref for turn in trajectory.turns for c in turn.tool_calls for ref in c.result_images]


def _candidate_images(
    trajectories: list[Trajectory], image_urls: Mapping[str, str]
) -> list[list[tuple[str, str]]]:
    """Per candidate, ``(ref, data URL)`` of its tool images: turns in order, candidates taking
    turns, at most ``MAX_VERIFIER_IMAGES`` in all; refs without a data URL are left out."""
    queues = [[(r, image_urls[r]) for r in tool_image_refs(t) if r in image_urls] for t in trajectories]
    chosen: list[list[tuple[str, str]]] = [[] for _ in trajectories]
    left = MAX_VERIFIER_IMAGES
    depth = 0
    while left and any(depth < len(q) for q in queues):
        for i, q in enumerate(queues):
            if depth < len(q) and left:
                chosen[i].append(q[depth])
                left -= 1
        depth += 1
    return chosen


def verifier_messages(
    task: Task,
    trajectories: list[Trajectory],
    image_url: str,
    observation: str | None = None,
    view: VerifierView = "evidence",
    image_urls: Mapping[str, str] | None = None,
    budget_tokens: int = VERIFIER_BUDGET_TOKENS,
) -> list[dict[str, Any]]:
    """The verifier request: image (or, in observer mode, its description) + task + each
    candidate's view (``evidence``: `verifier_view`; ``full``: `full_view` with the tool images
    found in ``image_urls``)."""
    prompt = verifier_prompt()
    question = load_style("direct").user
    task_text = render(question, task_extra=task_extra(task)).strip()
    share = budget_tokens * CHARS_PER_TOKEN // max(1, len(trajectories))
    images = (
        _candidate_images(trajectories, image_urls or {}) if view == "full" and observation is None else []
    )
    blocks = []
    for i, traj in enumerate(trajectories, 1):
        shown = full_view(traj, share) if view == "full" else verifier_view(traj)
        blocks.append(f"### Candidate {i}\n{json.dumps(shown, ensure_ascii=False, indent=1)}")
    user = render(prompt["user"], task_text=task_text, candidates="\n\n".join(blocks)).strip()
    if observation is not None:  # a text-only verifier reads what the observer saw
        seen = render(common()["observation"], observation=observation).strip()
        return [
            {"role": "system", "content": prompt["system"].strip()},
            {"role": "user", "content": f"{seen}\n\n{user}"},
        ]
    content: list[dict[str, Any]] = [
        {"type": "image_url", "image_url": {"url": image_url}},
        {"type": "text", "text": user},
    ]
    for i, pairs in enumerate(images, 1):
        if pairs:
            content.append({"type": "text", "text": f"Images the tools returned to candidate {i}, in order:"})
            content.extend({"type": "image_url", "image_url": {"url": url}} for _, url in pairs)
    return [{"role": "system", "content": prompt["system"].strip()}, {"role": "user", "content": content}]


async def verify(
    task: Task,
    trajectories: list[Trajectory],
    client: ChatClient,
    image: PreparedImage,
    *,
    max_tokens: int | None = None,
    temperature: float | None = 0.0,
    observation: Observation | None = None,
    view: VerifierView = "evidence",
    image_urls: Mapping[str, str] | None = None,
) -> tuple[Prediction | None, dict[str, Any]]:
    """Ask the verifier; return its parsed prediction (None when unusable) and a log record.

    With an ``observation`` (observer mode) the verifier gets the photo's description instead
    of the image, like the samples did. ``view`` and ``image_urls`` (tool image refs -> data
    URLs): see `verifier_messages`.
    """
    from geosleuth.tools.text import wrap_output

    seen = None
    if observation is not None:
        seen = wrap_output(f"observe_image photo by {observation.observer}", observation.text)
    messages = verifier_messages(task, trajectories, image.data_url, seen, view, image_urls)
    log: dict[str, Any] = {"model": client.model, "view": view}
    try:
        resp = await client.complete(messages, max_tokens=max_tokens, temperature=temperature)
    except ModelError as exc:
        log["error"] = str(exc)
        if observation is None and looks_like_image_rejection(exc):
            log["error"] += " -- the verifier refused the image: run with --observer (offline or a VLM)"
        return None, log
    text = resp.first.content
    log.update(text=text, latency_s=resp.latency_s, usage=resp.usage.model_dump())
    try:  # off the event loop, with a deadline: the other tasks' trajectories keep running
        pred = await bounded(
            DEFAULT_PARSE_TIMEOUT_S, parse_answer, text, "robust", choices=task.choices or None
        )
    except ParseTimeout as exc:
        log["error"] = f"verifier answer not parsed: {exc}"
        return None, log
    if pred.status is not ParseStatus.OK or not pred.has_coords:
        log["error"] = "verifier answer had no coordinates"
        return None, log
    pred = pred.model_copy(
        update={
            "coords_source": "aggregate",
            "evidence": [*pred.evidence, f"verifier {client.model} over {len(trajectories)} samples"],
        }
    )
    return pred, log
