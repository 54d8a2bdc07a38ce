"""Ratings of many models from pairwise battles, as GeoArena (and Chatbot Arena before it) rates them.

Pure math, no I/O. A battle is ``(model_a, model_b, winner)`` with winner one of :data:`OUTCOMES`.

* **Bradley–Terry** (GeoArena's released ``bt_mle.py``): the maximum-likelihood strengths β of
  P(i beats j) = 1 / (1 + 10^(β_j − β_i)), every tie (``tie`` and ``tie (bothbad)``) counting as
  half a win for each side; ratings 400·β + 1000. Like the released logistic regression (no
  intercept, no penalty, started at zero) the β sum to zero, so the ratings average 1000, and
  an anchor model is then shifted to its pinned rating (GeoArena: ``openai/gpt-4o`` = 1000).
  The released code builds its table with pandas, whose index alignment leaves out every pair
  that involves a model missing from one of its pivot tables (a model that never tied, once any
  battle is a tie); by default every battle counts here, and ``released=True`` fits that table
  as it is (:func:`released_table`). Where each model has a tie, a win and a loss both as
  ``model_a`` and ``model_b`` the two agree; otherwise a note names the models concerned.
  The MLE exists only when the "won or tied against" graph is strongly connected (otherwise a
  model that never lost would rate +∞): then no rating is given, and a note
  says why (:attr:`BradleyTerry.notes`), instead of the large finite number a stopped optimiser
  would print.
* **Online Elo** (GeoArena's leaderboard): K = 4, every model starting at 1000, battles replayed
  in order, both tie kinds scoring ½.
* **Bootstrap**: battles resampled with replacement and refitted, the 2.5 / 97.5 percentiles per
  model. Resampling n battles is a multinomial draw over the distinct (pair, outcome) cells, so a
  round costs the number of cells, not n.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

OUTCOMES: tuple[str, ...] = ("model_a", "model_b", "tie", "tie (bothbad)")
"""Chatbot Arena / GeoArena ``winner`` values, in the codes used here (0 … 3)."""
SCALE = 400.0
BASE = 10.0
INIT_RATING = 1000.0
ELO_K = 4.0
GEOARENA_ANCHOR: tuple[str, float] = ("openai/gpt-4o", 1000.0)
"""The anchor GeoArena's ``compute_bt`` pins when that model is rated and no other anchor is given."""
BOOTSTRAP_ROUNDS = 1000
MAX_NEWTON_STEPS = 100
GRADIENT_TOLERANCE = 1e-10


class ArenaError(ValueError):
    """Battles that cannot be rated as given (an unknown winner, a model against itself)."""


@dataclass(frozen=True)
class Battles:
    """Battles as integer columns over a list of model names (file order kept)."""

    models: tuple[str, ...]
    a: NDArray[np.int64]
    b: NDArray[np.int64]
    outcome: NDArray[np.int64]  # index into OUTCOMES

    @property
    def n(self) -> int:
        return int(self.a.size)


def battles_from(rows: Iterable[tuple[str, str, str]]) -> Battles:
    """Columns from ``(model_a, model_b, winner)`` triples; a bad triple raises, naming its position."""
    index: dict[str, int] = {}
    a: list[int] = []
    b: list[int] = []
    outcome: list[int] = []
    codes = {name: i for i, name in enumerate(OUTCOMES)}
    for number, (model_a, model_b, winner) in enumerate(rows, start=1):
        if winner not in codes:
            raise ArenaError(f"battle {number}: winner {winner!r} is not one of {', '.join(OUTCOMES)}")
        if model_a == model_b:
            raise ArenaError(f"battle {number}: {model_a!r} against itself")
        a.append(index.setdefault(model_a, len(index)))
        b.append(index.setdefault(model_b, len(index)))
        outcome.append(codes[winner])
    return Battles(
        tuple(index),
        np.asarray(a, dtype=np.int64),
        np.asarray(b, dtype=np.int64),
        np.asarray(outcome, dtype=np.int64),
    )


# ----------------------------------------------------------------------------- tallies


def cell_codes(battles: Battles) -> NDArray[np.int64]:
    """One code per battle for its (model_a, model_b, result) cell, both tie kinds one result."""
    p = len(battles.models)
    result = np.minimum(battles.outcome, 2)  # 0: a won, 1: b won, 2: tie
    return (battles.a * p + battles.b) * 3 + result


def score_matrix(codes: NDArray[np.int64], counts: NDArray[np.float64], p: int) -> NDArray[np.float64]:
    """``S[i, j]``: what i scored against j (a win 1, a tie ½) from cell codes and their counts."""
    pair, result = np.divmod(codes, 3)
    i, j = np.divmod(pair, p)
    s = np.zeros(p * p)
    np.add.at(s, i * p + j, counts * (result == 0))
    np.add.at(s, j * p + i, counts * (result == 1))
    ties = counts * (result == 2) / 2.0
    np.add.at(s, i * p + j, ties)
    np.add.at(s, j * p + i, ties)
    return s.reshape(p, p)


def tallies(battles: Battles) -> NDArray[np.int64]:
    """``T[r, i, j]``: battles i won (r = 0), lost (1) and tied (2) against j, in either seat."""
    p = len(battles.models)
    t = np.zeros((3, p, p), dtype=np.int64)
    result = np.minimum(battles.outcome, 2)  # model_a's view: 0 won, 1 lost, 2 tied
    np.add.at(t, (result, battles.a, battles.b), 1)
    np.add.at(t, (np.array([1, 0, 2])[result], battles.b, battles.a), 1)  # model_b's view
    return t


# ----------------------------------------------------------------------------- Bradley-Terry


def _strongly_connected(s: NDArray[np.float64]) -> bool:
    """Whether every model reaches every other along "scored something against" edges."""
    p = s.shape[0]
    edges = s > 0
    for graph in (edges, edges.T):
        seen = np.zeros(p, dtype=bool)
        seen[0] = True
        frontier = seen.copy()
        while frontier.any():
            new = graph[frontier].any(axis=0) & ~seen
            seen |= new
            frontier = new
        if not seen.all():
            return False
    return True


def fit_bt(s: NDArray[np.float64]) -> NDArray[np.float64] | None:
    """The BT strengths β (log10 odds, summing to 0) that maximise Σ S_ij log P(i beats j).

    Newton's method on θ = β·ln 10 with θ_0 held at 0 (the likelihood only sees differences),
    halving a step that would lower the likelihood; None when no finite maximum exists.
    """
    p = s.shape[0]
    if p < 2 or not _strongly_connected(s):
        return None
    n = s + s.T
    theta = np.zeros(p)

    def loglik(t: NDArray[np.float64]) -> float:
        diff = t[:, None] - t[None, :]
        return float(-(s * np.logaddexp(0.0, -diff)).sum())

    current = loglik(theta)
    for _ in range(MAX_NEWTON_STEPS):
        prob = 1.0 / (1.0 + np.exp(theta[None, :] - theta[:, None]))
        grad = (s - n * prob).sum(axis=1)
        if np.abs(grad[1:]).max() < GRADIENT_TOLERANCE * max(1.0, float(n.sum())):
            break
        w = n * prob * (1.0 - prob)
        hess = w - np.diag(w.sum(axis=1))
        step = np.zeros(p)
        step[1:] = np.linalg.solve(hess[1:, 1:], -grad[1:])
        scale = 1.0
        while scale > 1e-8:
            trial = theta + scale * step
            value = loglik(trial)
            if value >= current - 1e-12:
                theta, current = trial, value
                break
            scale /= 2.0
        else:
            break
    beta = theta / math.log(BASE)
    return beta - beta.mean()


def released_table(codes: NDArray[np.int64], p: int) -> NDArray[np.bool_]:
    """The models whose pairs GeoArena's pandas table keeps, from the cells that hold battles.

    ``ptbl_a_win * 2 + ptbl_b_win.T * 2 + ptbl_tie`` aligns pivot tables whose index and columns
    are the models seen in one role each; a pair survives (no NaN either way) only when both of
    its models won as model_a, lost as model_b, lost as model_a and won as model_b, and, once any
    battle is a tie, tied in both seats.
    """
    pair, result = np.divmod(codes, 3)
    first, second = np.divmod(pair, p)

    def seen(seat: NDArray[np.int64], outcome: int) -> NDArray[np.bool_]:
        out = np.zeros(p, dtype=bool)
        out[seat[result == outcome]] = True
        return out

    keep = seen(first, 0) & seen(second, 0) & seen(first, 1) & seen(second, 1)
    if (result == 2).any():
        keep &= seen(first, 2) & seen(second, 2)
    return keep


def _fit(
    codes: NDArray[np.int64], counts: NDArray[np.float64], p: int, released: bool
) -> NDArray[np.float64] | None:
    """β for every model (NaN: left out of the released table), or None without a finite MLE."""
    s = score_matrix(codes, counts, p)
    if not released:
        return fit_bt(s)
    keep = released_table(codes, p)
    fitted = fit_bt(s[np.ix_(keep, keep)]) if keep.sum() >= 2 else None
    if fitted is None:
        return None
    beta = np.full(p, np.nan)
    beta[keep] = fitted
    return beta


def ratings_from_beta(
    beta: NDArray[np.float64], models: Sequence[str], anchor: tuple[str, float] | None
) -> NDArray[np.float64]:
    """400·β + 1000, shifted so the anchor model (when rated) sits at its pinned rating."""
    ratings = SCALE * beta + INIT_RATING
    if anchor is not None and anchor[0] in models:
        pinned = ratings[list(models).index(anchor[0])]
        if math.isfinite(pinned):  # released: an anchor outside the table sits at 1000, shifting nothing
            ratings = ratings + (anchor[1] - pinned)
    return ratings


def default_anchor(models: Sequence[str], anchor: tuple[str, float] | None) -> tuple[str, float] | None:
    """The anchor given, else GeoArena's own when its model is rated, else none."""
    if anchor is not None:
        return anchor
    return GEOARENA_ANCHOR if GEOARENA_ANCHOR[0] in models else None


@dataclass(frozen=True)
class BradleyTerry:
    """BT ratings with bootstrap intervals; ``ratings`` is None when the MLE does not exist."""

    models: tuple[str, ...]
    ratings: NDArray[np.float64] | None
    ci95: NDArray[np.float64] | None  # (p, 2)
    anchor: tuple[str, float] | None
    rounds: int
    rounds_without_mle: int
    notes: tuple[str, ...] = ()
    released: bool = False  # fitted on GeoArena's pandas table (see ``released_table``)


def bradley_terry(
    battles: Battles,
    anchor: tuple[str, float] | None = None,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    released: bool = False,
) -> BradleyTerry:
    """Point ratings and a percentile bootstrap 95 % interval per model (``rounds`` resamples).

    ``released`` fits GeoArena's pandas table as it is (pairs of models outside
    :func:`released_table` left out, those models unrated); by default every battle counts.
    """
    models = battles.models
    p = len(models)
    if anchor is not None and anchor[0] not in models:
        raise ArenaError(f"anchor model {anchor[0]!r} fought no battle; rated: {', '.join(models)}")
    chosen = default_anchor(models, anchor)
    codes, counts = np.unique(cell_codes(battles), return_counts=True)
    notes = [_table_note(codes, models, released)] if not released_table(codes, p).all() else []
    beta = _fit(codes, counts.astype(np.float64), p, released)
    if beta is None:
        notes.insert(0, _no_mle_note(battles))
        return BradleyTerry(models, None, None, chosen, rounds, rounds, tuple(notes), released)
    point = ratings_from_beta(beta, models, chosen)
    rng = np.random.default_rng(seed)
    shares = counts / counts.sum()
    samples = []
    for _ in range(rounds):  # one draw per round: memory stays one row of cells
        row = rng.multinomial(battles.n, shares)
        kept = row > 0
        fitted = _fit(codes[kept], row[kept].astype(np.float64), p, released)
        if fitted is not None:
            samples.append(ratings_from_beta(fitted, models, chosen))
    missing = rounds - len(samples)
    ci = _percentiles(np.asarray(samples)) if samples else None
    if missing:
        notes.append(
            f"{missing} of {rounds} bootstrap resamples had no finite MLE (a model unbeaten in the "
            "resample) and were left out of the intervals"
        )
    return BradleyTerry(models, point, ci, chosen, rounds, missing, tuple(notes), released)


def _percentiles(samples: NDArray[np.float64]) -> NDArray[np.float64]:
    """2.5 / 97.5 percentiles per model over the resamples that rated it (NaN: none did)."""
    out = np.full((samples.shape[1], 2), np.nan)
    for j in range(samples.shape[1]):
        rated = samples[:, j][np.isfinite(samples[:, j])]
        if rated.size:
            out[j] = np.percentile(rated, [2.5, 97.5])
    return out


def _table_note(codes: NDArray[np.int64], models: Sequence[str], released: bool) -> str:
    """Which models GeoArena's table leaves out, and what that means for these ratings."""
    out = [m for m, k in zip(models, released_table(codes, len(models)), strict=True) if not k]
    names = ", ".join(out)
    if released:
        return (
            f"GeoArena's table leaves out every pair involving {names} (not seen winning, losing and, with "
            "ties, tying in both seats): unrated here, shown at 1000 on its leaderboard"
        )
    return (
        f"GeoArena's bt_mle.py would leave out every pair involving {names} (not seen winning, losing "
        "and, with ties, tying in both seats); these ratings count every battle (--as-released: its table)"
    )


def _no_mle_note(battles: Battles) -> str:
    """Why the BT MLE does not exist: who never lost (or never won) a battle."""
    t = tallies(battles)
    won, lost = (t[0] + t[2]).sum(axis=1), (t[1] + t[2]).sum(axis=1)
    unbeaten = [m for m, x in zip(battles.models, lost, strict=True) if x == 0]
    winless = [m for m, x in zip(battles.models, won, strict=True) if x == 0]
    parts = []
    if unbeaten:
        parts.append(f"never lost or tied: {', '.join(unbeaten)}")
    if winless:
        parts.append(f"never won or tied: {', '.join(winless)}")
    reason = "; ".join(parts) or "the models fall into groups that never beat one another both ways"
    return f"Bradley-Terry ratings do not exist for these battles ({reason}): they would be infinite"


# ----------------------------------------------------------------------------- Elo


def online_elo(battles: Battles, k: float = ELO_K, init: float = INIT_RATING) -> NDArray[np.float64]:
    """GeoArena's leaderboard Elo: each battle in order moves both ratings by K·(score − expected)."""
    ratings = np.full(len(battles.models), init)
    score_a = np.array([1.0, 0.0, 0.5, 0.5])[battles.outcome]
    for i, j, s in zip(battles.a.tolist(), battles.b.tolist(), score_a.tolist(), strict=True):
        expected = 1.0 / (1.0 + BASE ** ((ratings[j] - ratings[i]) / SCALE))
        ratings[i] += k * (s - expected)
        ratings[j] += k * ((1.0 - s) - (1.0 - expected))
    return ratings


# ----------------------------------------------------------------------------- the whole arena


@dataclass(frozen=True)
class PairRecord:
    """What one model did against another: wins, losses, ties and the win rate (ties ½)."""

    wins: int
    losses: int
    ties: int

    @property
    def battles(self) -> int:
        return self.wins + self.losses + self.ties

    @property
    def win_rate(self) -> float:
        return (self.wins + 0.5 * self.ties) / self.battles


@dataclass(frozen=True)
class Arena:
    """Everything a leaderboard shows: BT with intervals, Elo, battles and the win-rate matrix."""

    bt: BradleyTerry
    elo: dict[str, float]
    battles: dict[str, int]
    pairs: dict[str, dict[str, PairRecord]] = field(default_factory=dict)

    @property
    def models(self) -> tuple[str, ...]:
        return self.bt.models

    def ranked(self) -> list[str]:
        """Models by BT rating (by Elo where BT does not exist), best first."""
        if self.bt.ratings is not None:
            order = {
                m: r if math.isfinite(r) else -math.inf
                for m, r in zip(self.bt.models, self.bt.ratings.tolist(), strict=True)
            }
        else:
            order = self.elo
        return sorted(self.models, key=lambda m: (-order[m], m))


def rate(
    battles: Battles,
    anchor: tuple[str, float] | None = None,
    rounds: int = BOOTSTRAP_ROUNDS,
    seed: int = 0,
    released: bool = False,
) -> Arena:
    """Rate every model of ``battles`` (at least one battle); ``released``: see :func:`bradley_terry`."""
    if battles.n == 0:
        raise ArenaError("no battles to rate")
    t = tallies(battles)
    models = battles.models
    pairs = {
        m: {
            o: PairRecord(int(t[0, i, j]), int(t[1, i, j]), int(t[2, i, j]))
            for j, o in enumerate(models)
            if t[:, i, j].sum()
        }
        for i, m in enumerate(models)
    }
    return Arena(
        bt=bradley_terry(battles, anchor, rounds, seed, released),
        elo=dict(zip(models, online_elo(battles).tolist(), strict=True)),
        battles={m: int(t[:, i, :].sum()) for i, m in enumerate(models)},
        pairs=pairs,
    )


def as_json(arena: Arena) -> dict[str, object]:
    """``{"ratings": {model: {"bt", "ci95", "elo", "battles"}}, "win_rate": …}`` (ranked)."""
    bt = arena.bt
    ratings: dict[str, object] = {}
    for model in arena.ranked():
        i = arena.models.index(model)
        ratings[model] = {
            "bt": None if bt.ratings is None else _finite(bt.ratings[i]),
            "ci95": None
            if bt.ci95 is None or not np.isfinite(bt.ci95[i]).all()
            else [_finite(x) for x in bt.ci95[i]],
            "elo": round(arena.elo[model], 6),
            "battles": arena.battles[model],
        }
    return {
        "ratings": ratings,
        "win_rate": {m: {o: round(r.win_rate, 6) for o, r in arena.pairs[m].items()} for m in arena.ranked()},
        "pairs": {
            m: {o: {"wins": r.wins, "losses": r.losses, "ties": r.ties} for o, r in arena.pairs[m].items()}
            for m in arena.ranked()
        },
        "anchor": None if bt.anchor is None else {"model": bt.anchor[0], "rating": bt.anchor[1]},
        "bootstrap": {"rounds": bt.rounds, "without_mle": bt.rounds_without_mle},
        "table": "released" if bt.released else "every battle",
        "notes": list(bt.notes),
    }


def _finite(value: float) -> float | None:
    return round(float(value), 6) if math.isfinite(value) else None


def parse_anchor(text: str) -> tuple[str, float]:
    """``MODEL=RATING`` (the model name may itself hold ``=``: the last one splits)."""
    model, sep, value = text.rpartition("=")
    try:
        rating = float(value)
    except ValueError:
        rating = math.nan
    if not sep or not model or not math.isfinite(rating):
        raise ArenaError(f"--anchor {text!r}: expected MODEL=RATING, e.g. openai/gpt-4o=1000")
    return model, rating


def votes_from_rows(rows: Iterable[Mapping[str, object]]) -> Battles:
    """Battles from vote rows ``{model_a, model_b, winner}`` (extra keys ignored)."""

    def triples() -> Iterable[tuple[str, str, str]]:
        for number, row in enumerate(rows, start=1):
            missing = [k for k in ("model_a", "model_b", "winner") if not isinstance(row.get(k), str)]
            if missing:
                raise ArenaError(f"vote {number}: no text under {', '.join(missing)}")
            yield str(row["model_a"]), str(row["model_b"]), str(row["winner"])

    return battles_from(triples())
