"""`geosleuth arena`: battles from a votes file or from runs, rated by ``core.arena``, shown as text,
Markdown and JSON (the HTML section is ``eval.arena_html``).

From votes: one JSON object per line, ``{model_a, model_b, winner}`` as Chatbot Arena and GeoArena
write them; a line that is not such an object is skipped and named in the notes, never guessed.
From runs: every pair of runs fights once on each sample they share. The smaller error wins; it is
a tie when both errors are within the protocol's smallest threshold (both "right" at its finest
scale) or differ by less than ``tie_km`` (default :data:`DEFAULT_TIE_KM`); an answer without
coordinates (failed, unparsed, missing) has an infinite error, so two of them tie.
An optional judge (``eval.arena_judge``) decides the battles on the reasoning instead.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geosleuth.core import arena as core
from geosleuth.core import metrics
from geosleuth.eval.datasets.frozen import require_same_images
from geosleuth.eval.report.rundata import RunData, load_run
from geosleuth.eval.report.scores import protocol_for, score_run
from geosleuth.scoring.protocols import ScoringProtocol

DEFAULT_TIE_KM = 1.0
"""Errors closer than this are a tie: 1 km is the finest threshold of the classic Acc@k scale,
and a smaller gap says nothing about which model looked better."""
MAX_VOTE_CHARS = 1 << 16
"""A vote is a few short strings; a longer line (bytes) is not a vote and is never read whole."""
SHOWN_NOTES = 10


@dataclass
class Fight:
    """One battle between two runs on one sample, with both errors (km; inf: no coordinates)."""

    sample_id: str
    model_a: str
    model_b: str
    error_a: float
    error_b: float
    winner: str


@dataclass
class ArenaInput:
    """Battles ready to rate, where they came from, and what was skipped on the way."""

    source: str
    triples: list[tuple[str, str, str]]
    notes: list[str] = field(default_factory=list)
    fights: list[Fight] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)


# ----------------------------------------------------------------------------- votes


def _lines(path: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """``(number, text, None)`` per line, or ``(number, None, why)`` for a line that is too long
    (never held whole) or not UTF-8."""
    with path.open("rb") as handle:
        number = 0
        while raw := handle.readline(MAX_VOTE_CHARS + 1):
            number += 1
            if len(raw) > MAX_VOTE_CHARS and not raw.endswith(b"\n"):
                while (rest := handle.readline(MAX_VOTE_CHARS)) and not rest.endswith(b"\n"):
                    pass  # the rest of an overlong line, read in bounded pieces
                yield number, None, f"line {number}: longer than {MAX_VOTE_CHARS} bytes"
                continue
            try:
                yield number, raw.decode("utf-8-sig" if number == 1 else "utf-8"), None
            except UnicodeDecodeError as exc:
                yield number, None, f"line {number} is not UTF-8 text ({exc.reason} at byte {exc.start})"


def read_votes(path: Path) -> ArenaInput:
    """The votes of a JSONL file; bad lines are skipped and named, no vote at all is an error."""
    triples: list[tuple[str, str, str]] = []
    problems: list[str] = []
    for number, text, why in _lines(path):
        if text is None:
            problems.append(str(why))
            continue
        if not text.strip():
            continue
        problem = _vote(text, triples)
        if problem:
            problems.append(f"line {number}: {problem}")
    if not triples:
        shown = "; ".join(problems[:3]) or "the file is empty"
        raise core.ArenaError(f"{path}: no vote {{model_a, model_b, winner}} to rate ({shown})")
    return ArenaInput(str(path), triples, _skipped(problems, "votes"))


def _vote(text: str, out: list[tuple[str, str, str]]) -> str | None:
    """Append the vote on one line, or say why it is none."""
    try:
        row = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        return f"not JSON ({exc})"
    if not isinstance(row, dict):
        return "not a JSON object"
    values = [row.get(k) for k in ("model_a", "model_b", "winner")]
    if not all(isinstance(v, str) and v for v in values):
        return "needs text under model_a, model_b and winner"
    a, b, winner = (str(v) for v in values)
    if winner not in core.OUTCOMES:
        return f"winner {winner[:40]!r} is not one of {', '.join(core.OUTCOMES)}"
    if a == b:
        return f"{a[:40]!r} against itself"
    out.append((a, b, winner))
    return None


def _skipped(problems: list[str], what: str) -> list[str]:
    if not problems:
        return []
    shown = "; ".join(problems[:SHOWN_NOTES])
    more = f" … and {len(problems) - SHOWN_NOTES} more" if len(problems) > SHOWN_NOTES else ""
    return [f"{len(problems)} {what} skipped: {shown}{more}"]


# ----------------------------------------------------------------------------- runs


def run_names(runs: Sequence[RunData]) -> list[str]:
    """Each run's model name (its manifest's), made unique with the run folder where two agree."""
    names = [str(r.manifest.get("model") or r.config.get("model") or r.run_dir.name) for r in runs]
    return [f"{n} ({r.run_dir.name})" if names.count(n) > 1 else n for n, r in zip(names, runs, strict=True)]


def smallest_threshold(protocol: ScoringProtocol) -> float:
    """The protocol's finest Acc@k radius (km)."""
    return float(min(metrics.resolve_thresholds(protocol.thresholds)))


def outcome(error_a: float, error_b: float, within_km: float, strict: bool, tie_km: float) -> str:
    """The winner of one battle by error: smaller wins; both within the finest radius, or closer than
    ``tie_km`` (two infinite errors included), is a tie."""
    both_right = (
        (error_a < within_km and error_b < within_km) if strict else max(error_a, error_b) <= within_km
    )
    if both_right or error_a == error_b or abs(error_a - error_b) < tie_km:
        return "tie"
    return "model_a" if error_a < error_b else "model_b"


def fights_from_runs(
    run_dirs: Sequence[Path], protocol: str | None = None, tie_km: float = DEFAULT_TIE_KM
) -> ArenaInput:
    """Every pair of runs on every sample they share, in sample-id order then run order."""
    if len(run_dirs) < 2:
        raise core.ArenaError("an arena of runs needs at least two run directories")
    if not math.isfinite(tie_km) or tie_km < 0:
        raise core.ArenaError(f"--tie-km {tie_km}: expected a distance >= 0 km")
    runs = [load_run(Path(d)) for d in run_dirs]
    common = set.intersection(*({s.id for s in r.samples} for r in runs))
    if not common:
        raise core.ArenaError("the runs share no sample ids")
    require_same_images(
        [(str(r.run_dir), r.full_manifest()) for r in runs], common
    )  # same pixels or no battle
    chosen = protocol_for(protocol or runs[0].config.get("protocol"), runs[0].samples)
    errors = []
    for run in runs:
        samples = sorted((s for s in run.samples if s.id in common), key=lambda s: s.id)
        if any(s.lat is None or s.lon is None for s in samples):
            raise core.ArenaError(f"{run.run_dir}: some shared samples have no true coordinates to battle on")
        rows = score_run(samples, run.records, chosen).rows()
        errors.append(
            {r.sample_id: (r.distance_km if math.isfinite(r.distance_km) else math.inf) for r in rows}
        )
    names = run_names(runs)
    within = smallest_threshold(chosen)
    fights = []
    for sid in sorted(common):
        for i in range(len(runs)):
            for j in range(i + 1, len(runs)):
                ea, eb = errors[i][sid], errors[j][sid]
                winner = outcome(ea, eb, within, chosen.strict_threshold, tie_km)
                fights.append(Fight(sid, names[i], names[j], ea, eb, winner))
    settings = {
        "protocol": chosen.name,
        "tie_within_km": within,
        "tie_km": tie_km,
        "samples": len(common),
        "runs": {n: str(r.run_dir) for n, r in zip(names, runs, strict=True)},
    }
    source = ", ".join(str(d) for d in run_dirs)
    return ArenaInput(source, [(f.model_a, f.model_b, f.winner) for f in fights], [], fights, settings)


def judged(data: ArenaInput, winners: Sequence[str]) -> ArenaInput:
    """The same fights with the winners another judge gave (one per fight, in order)."""
    fights = [
        Fight(f.sample_id, f.model_a, f.model_b, f.error_a, f.error_b, w)
        for f, w in zip(data.fights, winners, strict=True)
    ]
    triples = [(f.model_a, f.model_b, f.winner) for f in fights]
    return ArenaInput(data.source, triples, data.notes, fights, {**data.settings, "decided_by": "judge"})


def battle_rows(fights: Sequence[Fight]) -> Iterator[dict[str, Any]]:
    """Each battle as a Chatbot Arena vote row with its sample and both errors (km; null: none)."""
    for f in fights:
        yield {
            "model_a": f.model_a,
            "model_b": f.model_b,
            "winner": f.winner,
            "sample_id": f.sample_id,
            "error_a_km": f.error_a if math.isfinite(f.error_a) else None,
            "error_b_km": f.error_b if math.isfinite(f.error_b) else None,
        }


# ----------------------------------------------------------------------------- rating and output


def arena_result(
    data: ArenaInput,
    anchor: tuple[str, float] | None = None,
    rounds: int = core.BOOTSTRAP_ROUNDS,
    seed: int = 0,
    released: bool = False,
) -> dict[str, Any]:
    """The arena's JSON: ``ratings`` (bt, ci95, elo, battles) first, then the win rates and how;
    ``released`` fits GeoArena's pandas table as it is (see ``core.arena.released_table``)."""
    rated = core.rate(core.battles_from(data.triples), anchor, rounds, seed, released)
    body = core.as_json(rated)
    notes = [*data.notes, *body.pop("notes")]  # type: ignore[misc]
    return {
        **body,
        "source": data.source,
        "n_battles": len(data.triples),
        "settings": {"bootstrap_seed": seed, **data.settings},
        "notes": notes,
    }


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _rows(result: dict[str, Any]) -> Iterator[tuple[int, str, dict[str, Any]]]:
    for rank, (model, r) in enumerate(result["ratings"].items(), start=1):
        yield rank, model, r


def _ci(r: dict[str, Any]) -> str:
    return "—" if r["ci95"] is None else f"[{r['ci95'][0]:.1f}, {r['ci95'][1]:.1f}]"


def _how(result: dict[str, Any]) -> str:
    anchor = result["anchor"]
    pinned = f"; {anchor['model']} pinned at {anchor['rating']:g}" if anchor else "; ratings average 1000"
    rounds = result["bootstrap"]["rounds"]
    return (
        f"Bradley-Terry MLE (ties half a win, 400·β + 1000{pinned}); 95 % interval from {rounds} "
        "bootstrap resamples of the battles; online Elo K = 4 from 1000 in battle order"
    )


def _settings_line(result: dict[str, Any]) -> str | None:
    s = result["settings"]
    if "protocol" not in s:
        return None
    by = "a judge reading the reasoning" if s.get("decided_by") == "judge" else "the smaller error"
    return (
        f"{s['samples']} shared samples, protocol {s['protocol']}; won by {by}; a tie when both are within "
        f"{s['tie_within_km']:g} km or their errors differ by less than {s['tie_km']:g} km"
    )


def arena_text(result: dict[str, Any]) -> str:
    """A plain-text leaderboard."""
    width = max(len("model"), *(len(m) for m in result["ratings"]))
    lines = [f"Arena: {result['n_battles']} battles from {result['source']}", _how(result)]
    if (line := _settings_line(result)) is not None:
        lines.append(line)
    lines += ["", f"{'#':>3}  {'model':<{width}}  {'BT':>7}  {'95 % CI':>17}  {'Elo':>7}  {'battles':>7}"]
    for rank, model, r in _rows(result):
        bt, elo = _fmt(r["bt"]), _fmt(r["elo"])
        lines.append(f"{rank:>3}  {model:<{width}}  {bt:>7}  {_ci(r):>17}  {elo:>7}  {r['battles']:>7}")
    lines += [f"note: {n}" for n in result["notes"]]
    return "\n".join(lines) + "\n"


def arena_markdown(result: dict[str, Any]) -> str:
    """A leaderboard and a win-rate matrix in Markdown, ready for a paper's appendix."""
    models = list(result["ratings"])
    lines = [f"# Arena ({result['n_battles']} battles)", "", _how(result) + "."]
    if (line := _settings_line(result)) is not None:
        lines += ["", line + "."]
    lines += ["", "| # | model | BT | 95 % CI | Elo | battles |", "|---|---|---|---|---|---|"]
    for rank, model, r in _rows(result):
        lines.append(f"| {rank} | {model} | {_fmt(r['bt'])} | {_ci(r)} | {_fmt(r['elo'])} | {r['battles']} |")
    lines += [
        "",
        "## Win rate (row over column, ties half)",
        "",
        "| | " + " | ".join(models) + " |",
        "|---|" + "---|" * len(models),
    ]
    for m in models:
        cells = [
            _fmt(100.0 * result["win_rate"][m][o], 1) + " %" if o in result["win_rate"][m] else "—"
            for o in models
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if result["notes"]:
        lines += ["", *(f"- {n}" for n in result["notes"])]
    return "\n".join(lines) + "\n"
