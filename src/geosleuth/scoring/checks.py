"""Sanity checks that turn into warnings: misaligned files, labels in another language."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.geo import haversine_km

MIN_ROWS = 20
SHIFTS = (-3, -2, -1, 1, 2, 3)


def misalignment_warning(
    plat: NDArray[np.float64],
    plon: NDArray[np.float64],
    tlat: NDArray[np.float64],
    tlon: NDArray[np.float64],
    seed: int = 0,
) -> str | None:
    """Warn when predictions sit closer to other rows' ground truth than to their own.

    Two signatures: an off-by-k shift (row i's prediction matches row i+k's truth), and
    predictions that are no closer to their own truth than to a random row's.
    """
    ok = np.isfinite(plat) & np.isfinite(plon) & np.isfinite(tlat) & np.isfinite(tlon)
    if ok.sum() < MIN_ROWS:
        return None
    pa, po, ta, to = plat[ok], plon[ok], tlat[ok], tlon[ok]
    own = haversine_km(pa, po, ta, to)
    own_median = float(np.median(own))
    for shift in SHIFTS:
        shifted = haversine_km(pa, po, np.roll(ta, shift), np.roll(to, shift))
        closer = float(np.mean(shifted < own))
        shifted_median = float(np.median(shifted))
        if closer > 0.5 and shifted_median < 0.5 * own_median:
            return (
                f"file looks misaligned: {closer:.0%} of predictions land closer to the ground truth "
                f"{abs(shift)} row(s) {'below' if shift < 0 else 'above'} their own (median error "
                f"{own_median:.1f} km as given, {shifted_median:.1f} km shifted); check ids and row order"
            )
    perm = np.random.default_rng(seed).permutation(len(pa))
    random_median = float(np.median(haversine_km(pa, po, ta[perm], to[perm])))
    if own_median >= 0.9 * random_median and own_median > 100.0:
        return (
            f"predictions are no closer to their own ground truth (median {own_median:.0f} km) than to a "
            f"random row's (median {random_median:.0f} km): the file may be misaligned with its ground truth"
        )
    return None


def _dominant_script(texts: Sequence[str]) -> tuple[str | None, float]:
    from geosleuth.core.text import script_of

    scripts = [s for s in (script_of(t) for t in texts if t) if s is not None]
    if not scripts:
        return None, 0.0
    script, count = Counter(scripts).most_common(1)[0]
    return script, count / len(scripts)


def language_warning(predicted: Sequence[str | None], truth: Sequence[str | None], level: str) -> str | None:
    """Warn when ground-truth labels and predicted names are written in different scripts."""
    pairs = [(p, t) for p, t in zip(predicted, truth, strict=True) if p and t]
    if len(pairs) < 3:
        return None
    p_script, p_share = _dominant_script([p for p, _ in pairs])
    t_script, t_share = _dominant_script([t for _, t in pairs])
    if p_script and t_script and p_script != t_script and p_share > 0.6 and t_share > 0.6:
        return (
            f"ground-truth {level} labels are mostly in {t_script} script but predictions in {p_script}: "
            f"text-level accuracy relies on alias matching and may undercount"
        )
    return None
