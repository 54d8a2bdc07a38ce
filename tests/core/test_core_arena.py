"""The arena against hand-solved cases and GeoArena's released formulas (bt_mle.py, leaderboard.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.arena import (
    ArenaError,
    as_json,
    battles_from,
    bradley_terry,
    cell_codes,
    online_elo,
    parse_anchor,
    rate,
    score_matrix,
)

# Three models whose results agree exactly with BT strengths 10^β in the ratio 4 : 2 : 1:
#   A vs B: 1 win for A and 2 ties (one of each kind) = 2 half-wins of 3 → P(A>B) = 2/3 = 2/(2+1)
#   B vs C: B wins 2, C wins 1                                           → P(B>C) = 2/3 = 2/(2+1)
#   A vs C: A wins 4, C wins 1                                           → P(A>C) = 4/5 = 4/(4+1)
# Each observed share equals the model's probability, so the likelihood's gradient is zero there:
# β_A − β_B = β_B − β_C = log10 2. The released fit (no intercept, started at 0) keeps Σβ = 0,
# so β_B = 0, β_A = log10 2, β_C = −log10 2, and 400·β + 1000 gives
#   A = 1000 + 400·0.30103 = 1120.412,  B = 1000,  C = 1000 − 120.412 = 879.588.
PAPER = [
    ("A", "B", "model_a"),
    ("A", "B", "tie"),
    ("B", "A", "tie (bothbad)"),
    ("B", "C", "model_a"),
    ("C", "B", "model_b"),
    ("C", "B", "model_a"),
    ("A", "C", "model_a"),
    ("C", "A", "model_b"),
    ("C", "A", "model_b"),
    ("C", "A", "model_b"),
    ("C", "A", "model_a"),
]
LOG2 = 400 * math.log10(2)  # 120.412


def _bt(rows: list[tuple[str, str, str]], **kw: object) -> dict[str, float]:
    result = bradley_terry(battles_from(rows), rounds=0, **kw)  # type: ignore[arg-type]
    assert result.ratings is not None
    return dict(zip(result.models, result.ratings.tolist(), strict=True))


def test_three_model_arena_solved_on_paper() -> None:
    ratings = _bt(PAPER)
    assert ratings["A"] == pytest.approx(1000 + LOG2, abs=1e-6)
    assert ratings["B"] == pytest.approx(1000.0, abs=1e-6)
    assert ratings["C"] == pytest.approx(1000 - LOG2, abs=1e-6)


def test_anchor_pins_one_model_and_shifts_the_rest() -> None:
    ratings = _bt(PAPER, anchor=("C", 1500.0))  # C at 1500: B = 1500 + 120.412, A = 1500 + 240.824
    assert ratings["C"] == pytest.approx(1500.0)
    assert ratings["B"] == pytest.approx(1500 + LOG2, abs=1e-6)
    assert ratings["A"] == pytest.approx(1500 + 2 * LOG2, abs=1e-6)


def test_geoarena_anchor_when_gpt4o_is_rated() -> None:
    renamed = [(a.replace("B", "openai/gpt-4o"), b.replace("B", "openai/gpt-4o"), w) for a, b, w in PAPER]
    ratings = _bt(renamed)  # gpt-4o (B) pinned at 1000 as bt_mle.py does; it was 1000 already
    assert ratings["openai/gpt-4o"] == pytest.approx(1000.0)
    shifted = _bt(
        [(a.replace("C", "openai/gpt-4o"), b.replace("C", "openai/gpt-4o"), w) for a, b, w in PAPER]
    )
    assert shifted["openai/gpt-4o"] == pytest.approx(1000.0)  # C pinned: A = 1000 + 2·120.412
    assert shifted["A"] == pytest.approx(1000 + 2 * LOG2, abs=1e-6)


def test_an_anchor_that_never_fought_is_an_error() -> None:
    with pytest.raises(ArenaError, match="'Z' fought no battle"):
        bradley_terry(battles_from(PAPER), anchor=("Z", 1000.0), rounds=0)


def test_matches_the_released_weighted_logistic_regression() -> None:
    """bt_mle.py: one row per ordered pair with X = ±ln 10, Y = 1 weighted by 2·wins + ties of the
    row model and Y = 0 weighted by those of the column model; LogisticRegression without
    intercept or penalty. The same fit on an uneven four-model case built here."""
    sklearn = pytest.importorskip("sklearn.linear_model")
    rows = [*PAPER, ("D", "A", "model_a"), ("A", "D", "model_a"), ("D", "C", "tie"), ("B", "D", "model_b")]
    battles = battles_from(rows)
    p = len(battles.models)
    codes, counts = np.unique(cell_codes(battles), return_counts=True)
    s = score_matrix(codes, counts.astype(float), p)
    x, y, w = [], [], []
    for i in range(p):
        for j in range(p):
            if i != j:
                row = np.zeros(p)
                row[i], row[j] = math.log(10), -math.log(10)
                x += [row, row]
                y += [1, 0]
                w += [2 * s[i, j], 2 * s[j, i]]
    fit = sklearn.LogisticRegression(fit_intercept=False, C=np.inf, tol=1e-10, max_iter=10_000)
    fit.fit(np.array(x), np.array(y), sample_weight=np.array(w))
    released = 400 * fit.coef_[0] + 1000
    ours = _bt(rows)
    for i, model in enumerate(battles.models):
        assert ours[model] == pytest.approx(released[i], abs=1e-3), model


# PAPER with every battle also fought in the other seats, and B–C rebalanced so that every model
# won, lost and tied as model_a and as model_b: shares are unchanged (A–B (2 + 4·½)/6 = 2/3,
# B–C (3 + 2·½)/6 = 2/3, A–C 8/10 = 4/5), so the ratings are still 1120.412 / 1000 / 879.588.
FLIP = {"model_a": "model_b", "model_b": "model_a"}
SEATED = [
    *[r for r in PAPER if {r[0], r[1]} != {"B", "C"}],
    *[(b, a, FLIP.get(w, w)) for a, b, w in PAPER if {a, b} != {"B", "C"}],
    ("B", "C", "model_a"), ("C", "B", "model_b"), ("B", "C", "model_a"), ("C", "B", "model_a"),
    ("B", "C", "tie"), ("C", "B", "tie"),
]  # fmt: skip
# D won once as model_a and tied once as model_b: GeoArena's pandas table has no D row or column
# in its b-win and a-win-as-model_b pivots, so every pair with D is NaN and left out.
WITH_D = [*SEATED, ("D", "A", "model_a"), ("B", "D", "tie")]


def test_released_table_leaves_out_a_model_missing_from_a_pivot() -> None:
    assert _bt(SEATED) == pytest.approx(_bt(SEATED, released=True))  # every model in every role
    assert _bt(SEATED)["A"] == pytest.approx(1000 + LOG2, abs=1e-6)
    released = bradley_terry(battles_from(WITH_D), rounds=0, released=True)
    assert released.ratings is not None
    ratings = dict(zip(released.models, released.ratings.tolist(), strict=True))
    assert ratings["A"] == pytest.approx(1000 + LOG2, abs=1e-6)  # D's battles left out: as SEATED
    assert ratings["C"] == pytest.approx(1000 - LOG2, abs=1e-6)
    assert math.isnan(ratings["D"]) and "pair involving D" in released.notes[0]
    every = bradley_terry(battles_from(WITH_D), rounds=0)
    assert every.ratings is not None and np.isfinite(every.ratings).all()
    assert "--as-released" in every.notes[0]
    body = as_json(rate(battles_from(WITH_D), rounds=20, released=True))
    assert body["ratings"]["D"]["bt"] is None and body["table"] == "released"  # type: ignore[index]
    assert list(body["ratings"])[-1] == "D"  # type: ignore[arg-type]


def test_unbeaten_model_has_no_rating_and_a_note() -> None:
    result = bradley_terry(battles_from([("A", "B", "model_a"), ("B", "C", "tie")]), rounds=10)
    assert result.ratings is None and result.ci95 is None
    assert "never lost or tied: A" in result.notes[0]


def test_online_elo_by_hand() -> None:
    # K = 4, all start at 1000.
    # 1. A beats B, equal ratings: expected 0.5 → A = 1000 + 4·0.5 = 1002, B = 998.
    # 2. B ties C: E_B = 1 / (1 + 10^((1000 − 998)/400)) = 1 / (1 + 10^0.005) = 0.4971218;
    #    B = 998 + 4·(0.5 − 0.4971218) = 998.0115128, C = 1000 − 0.0115128 = 999.9884872.
    # 3. C beats A ("model_b" with A as model_a): E_A = 1 / (1 + 10^((999.9884872 − 1002)/400))
    #    = 1 / (1 + 10^−0.0050288) = 0.5028948; A = 1002 − 4·0.5028948 = 999.9884209,
    #    C = 999.9884872 + 4·0.5028948 = 1002.0000663.
    battles = battles_from([("A", "B", "model_a"), ("B", "C", "tie (bothbad)"), ("A", "C", "model_b")])
    elo = dict(zip(battles.models, online_elo(battles).tolist(), strict=True))
    assert elo["A"] == pytest.approx(999.9884209, abs=1e-6)
    assert elo["B"] == pytest.approx(998.0115128, abs=1e-6)
    assert elo["C"] == pytest.approx(1002.0000663, abs=1e-6)


def test_bootstrap_is_seeded_and_brackets_the_point() -> None:
    battles = battles_from(PAPER * 20)
    one, two = bradley_terry(battles, rounds=200, seed=3), bradley_terry(battles, rounds=200, seed=3)
    assert one.ci95 is not None and two.ci95 is not None and one.ratings is not None
    assert np.array_equal(one.ci95, two.ci95)
    assert np.all(one.ci95[:, 0] <= one.ratings) and np.all(one.ratings <= one.ci95[:, 1])
    pinned = bradley_terry(battles, anchor=("B", 1000.0), rounds=200)
    assert pinned.ci95 is not None
    b = pinned.models.index("B")
    assert pinned.ci95[b].tolist() == pytest.approx([1000.0, 1000.0])  # the anchor does not move


def test_win_rates_and_battle_counts() -> None:
    body = as_json(rate(battles_from(PAPER), rounds=0))
    # A vs B: 1 win, 2 ties of 3 → (1 + 1)/3; A vs C: 4 of 5; C vs B: 1 of 3
    assert body["win_rate"]["A"]["B"] == pytest.approx(2 / 3, abs=1e-6)  # type: ignore[index]
    assert body["win_rate"]["A"]["C"] == pytest.approx(0.8)  # type: ignore[index]
    assert body["win_rate"]["C"]["B"] == pytest.approx(1 / 3, abs=1e-6)  # type: ignore[index]
    ratings = body["ratings"]
    assert list(ratings) == ["A", "B", "C"]  # type: ignore[arg-type]
    assert [ratings[m]["battles"] for m in "ABC"] == [8, 6, 8]  # type: ignore[index]
    assert body["pairs"]["B"]["A"] == {"wins": 0, "losses": 1, "ties": 2}  # type: ignore[index]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("A", "B", "draw")], "winner 'draw'"),
        ([("A", "A", "tie")], "against itself"),
    ],
)
def test_bad_battles_are_named(rows: list[tuple[str, str, str]], message: str) -> None:
    with pytest.raises(ArenaError, match=message):
        battles_from(rows)


def test_parse_anchor() -> None:
    assert parse_anchor("openai/gpt-4o=1000") == ("openai/gpt-4o", 1000.0)
    assert parse_anchor("a=b=1200.5") == ("a=b", 1200.5)
    for bad in ("gpt", "=1000", "gpt=", "gpt=nan"):
        with pytest.raises(ArenaError, match="MODEL=RATING"):
            parse_anchor(bad)


SEATS = st.lists(
    st.tuples(st.sampled_from("ABC"), st.sampled_from("ABC"), st.sampled_from(["model_a", "model_b", "tie"])),
    min_size=1,
    max_size=40,
).map(lambda rows: [r for r in rows if r[0] != r[1]])


@settings(max_examples=60, deadline=None)
@given(SEATS)
def test_seats_do_not_matter(rows: list[tuple[str, str, str]]) -> None:
    """Swapping model_a and model_b (and the winner with them) rates every model the same."""
    if not rows:
        return
    flip = {"model_a": "model_b", "model_b": "model_a", "tie": "tie"}
    one = bradley_terry(battles_from(rows), rounds=0)
    two = bradley_terry(battles_from([(b, a, flip[w]) for a, b, w in rows]), rounds=0)
    assert (one.ratings is None) == (two.ratings is None)
    if one.ratings is not None and two.ratings is not None:
        left = dict(zip(one.models, one.ratings.tolist(), strict=True))
        right = dict(zip(two.models, two.ratings.tolist(), strict=True))
        assert all(left[m] == pytest.approx(right[m], abs=1e-6) for m in left)
