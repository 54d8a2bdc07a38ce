"""Benchmark the arena (issue 39): Bradley-Terry with a 1000-round bootstrap on 100,000 battles.

Battles are drawn from known BT strengths (10 models, 400·β spread over ±300 points, 10 % ties).
Printed beside a reference measured in the same run:

- ``core.arena.rate``: BT point fit, 1000 bootstrap rounds (a multinomial draw over the distinct
  (pair, outcome) cells per round), online Elo and the win-rate tallies, wall seconds;
- the released procedure: per round, resample the battle table with pandas
  (``DataFrame.sample(frac=1, replace=True)``), build the win / tie pivot tables and fit
  scikit-learn's ``LogisticRegression`` (no intercept, no penalty) as GeoArena's ``bt_mle.py``
  does; timed on ``--reference-rounds`` rounds and scaled to the same number of rounds.
  Without pandas or scikit-learn the reference resamples with NumPy and fits with the same
  Newton solver (stated in the output);
- the agreement of the two point ratings (max |Δ| in rating points).

Run: ``.venv/bin/python bench/arena_bench.py [--battles 100000] [--rounds 1000] [--reference-rounds 50]``
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from geosleuth.core.arena import OUTCOMES, battles_from, cell_codes, fit_bt, rate, score_matrix


def synthetic(n: int, models: int, seed: int) -> list[tuple[str, str, str]]:
    rng = np.random.default_rng(seed)
    beta = np.linspace(-0.75, 0.75, models)  # ±300 rating points
    a = rng.integers(0, models, n)
    b = (a + rng.integers(1, models, n)) % models
    p_a = 1.0 / (1.0 + 10.0 ** (beta[b] - beta[a]))
    u = rng.random(n)
    tie = rng.random(n) < 0.1
    outcome = np.where(tie, np.where(rng.random(n) < 0.5, 2, 3), np.where(u < p_a, 0, 1))
    names = [f"model-{i}" for i in range(models)]
    return [
        (names[i], names[j], OUTCOMES[o])
        for i, j, o in zip(a.tolist(), b.tolist(), outcome.tolist(), strict=True)
    ]


def released_fit(frame, models: list[str]) -> np.ndarray:  # type: ignore[no-untyped-def]
    """bt_mle.py's fit of one battle table: pivot the wins and ties, one weighted row per ordered pair."""
    import pandas as pd
    from sklearn.linear_model import LogisticRegression

    index = {m: i for i, m in enumerate(models)}
    p = len(models)
    won_a = pd.pivot_table(
        frame[frame.winner == "model_a"], index="model_a", columns="model_b", aggfunc="size", fill_value=0
    )
    won_b = pd.pivot_table(
        frame[frame.winner == "model_b"], index="model_a", columns="model_b", aggfunc="size", fill_value=0
    )
    tied = pd.pivot_table(
        frame[frame.winner.isin(["tie", "tie (bothbad)"])],
        index="model_a",
        columns="model_b",
        aggfunc="size",
        fill_value=0,
    )
    table = (won_a * 2 + won_b.T * 2 + tied + tied.T).reindex(index=models, columns=models).fillna(0)
    rows, labels, weights = [], [], []
    for ma in models:
        for mb in models:
            if ma == mb:
                continue
            x = np.zeros(p)
            x[index[ma]], x[index[mb]] = math.log(10), -math.log(10)
            rows += [x, x]
            labels += [1.0, 0.0]
            weights += [table.loc[ma, mb], table.loc[mb, ma]]
    fit = LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-6)
    fit.fit(np.array(rows), np.array(labels), sample_weight=np.array(weights))
    return 400 * fit.coef_[0] + 1000


def reference(rows: list[tuple[str, str, str]], rounds: int, seed: int) -> tuple[float, np.ndarray, str]:
    """Seconds for ``rounds`` released-style bootstrap rounds, the point ratings, and what ran."""
    battles = battles_from(rows)
    models = list(battles.models)
    try:
        import pandas as pd
        import sklearn  # noqa: F401
    except ImportError:
        rng = np.random.default_rng(seed)
        p = len(models)
        codes = cell_codes(battles)
        start = time.perf_counter()
        for _ in range(rounds):
            pick = codes[rng.integers(0, codes.size, codes.size)]
            uniq, counts = np.unique(pick, return_counts=True)
            fit_bt(score_matrix(uniq, counts.astype(float), p))
        seconds = time.perf_counter() - start
        beta = fit_bt(score_matrix(*np.unique(codes, return_counts=True), p))
        assert beta is not None
        return seconds, 400 * beta + 1000, "NumPy resample of every battle + the same Newton fit"
    frame = pd.DataFrame(rows, columns=["model_a", "model_b", "winner"])
    point = released_fit(frame, models)
    start = time.perf_counter()
    for i in range(rounds):
        released_fit(frame.sample(frac=1.0, replace=True, random_state=seed + i), models)
    return (
        time.perf_counter() - start,
        point,
        "pandas resample + pivot tables + scikit-learn LogisticRegression",
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--battles", type=int, default=100_000)
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1000)
    parser.add_argument("--reference-rounds", type=int, default=50)
    args = parser.parse_args()
    rows = synthetic(args.battles, args.models, seed=0)
    battles = battles_from(rows)
    start = time.perf_counter()
    arena = rate(battles, rounds=args.rounds, seed=0)
    ours = time.perf_counter() - start
    assert arena.bt.ratings is not None and arena.bt.ci95 is not None
    ref_seconds, ref_point, what = reference(rows, args.reference_rounds, seed=0)
    scaled = ref_seconds * args.rounds / max(1, args.reference_rounds)
    widest = float((arena.bt.ci95[:, 1] - arena.bt.ci95[:, 0]).max())
    print(f"battles {args.battles:,}, models {args.models}, bootstrap rounds {args.rounds}")
    print(f"geosleuth arena (BT + {args.rounds} bootstrap rounds + Elo + win rates): {ours:.2f} s")
    print(
        f"reference ({what}): {ref_seconds:.2f} s for {args.reference_rounds} rounds, "
        f"{scaled:.1f} s scaled to {args.rounds}"
    )
    print(f"ratio reference / geosleuth: {scaled / ours:.1f}x")
    print(
        f"point ratings, max |geosleuth - reference|: {float(np.abs(arena.bt.ratings - ref_point).max()):.4f}"
    )
    print(f"widest 95 % interval: {widest:.1f} rating points")


if __name__ == "__main__":
    main()
