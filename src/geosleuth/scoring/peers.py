"""Peers' released rules that are code, not data: G3's answer regex and fallbacks, PIGEON's country.

Each function reproduces one step of a released evaluation script, named where it is used
(``protocols.py``), so ``--protocol g3`` or ``--protocol pigeon`` gives the number the paper's
own code would print for the same answers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from geosleuth.core.parsing import MAX_PARSE_CHARS, without_tool_output
from geosleuth.core.records import ParseStatus, Prediction
from geosleuth.scoring.protocols import ScoringProtocol

G3_NUMBER = re.compile(r"[-+]?(?<!\d)\d+\.\d+")
"""G3's ``[-+]?\\d+\\.\\d+`` (aggregate_llm_predictions.py). Starting only where a digit run starts
finds the same matches (a match always ends a run, and a run that fails at its start fails
everywhere inside it) in linear time on adversarial digit runs."""

RELEASED_ORIGIN = "released_origin"
"""``Prediction.recovered`` mark: the released code put this answer at (0, 0)."""


def g3_answer(text: str) -> Prediction:
    """G3's reading of an answer: its first two decimal numbers are latitude and longitude.

    Integers ("48") are not numbers to this regex, and the numbers are taken as found,
    out of range or not (the evaluation step sets those to 0). Text inside tool output is
    data, not the model's answer, and is skipped (G3's own answers have none).
    """
    own = without_tool_output(text[:MAX_PARSE_CHARS])
    numbers = []
    for match in G3_NUMBER.finditer(own):
        numbers.append(float(match.group()))
        if len(numbers) == 2:
            return Prediction(
                lat=numbers[0], lon=numbers[1], raw=text[:2000], status=ParseStatus.OK, format="g3"
            )
    return Prediction(raw=text[:2000], status=ParseStatus.FAILED, format="g3")


def zero_out_of_range(prediction: Prediction) -> Prediction:
    """G3's IndexSearch.py: a latitude outside [-90, 90] becomes 0, and so does such a longitude."""
    lat, lon = prediction.lat, prediction.lon
    if lat is None or lon is None:
        return prediction
    new_lat = 0.0 if not -90.0 <= lat <= 90.0 else lat
    new_lon = 0.0 if not -180.0 <= lon <= 180.0 else lon
    if (new_lat, new_lon) == (lat, lon):
        return prediction
    return prediction.model_copy(
        update={"lat": new_lat, "lon": new_lon, "recovered": [*prediction.recovered, "zeroed"]}
    )


def at_released_point(prediction: Prediction, point: tuple[float, float]) -> Prediction:
    """An answer without coordinates placed where the released code puts it (G3: ``'0.0', '0.0'``).

    The status stays failed, so the row is still counted as unparsed.
    """
    if prediction.has_coords:
        return prediction
    return prediction.model_copy(
        update={"lat": point[0], "lon": point[1], "recovered": [*prediction.recovered, RELEASED_ORIGIN]}
    )


def released_points(
    protocol: ScoringProtocol, plat: NDArray[np.float64], plon: NDArray[np.float64]
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The two rules above on coordinate arrays (NaN = no answer), for scoring without files."""
    if protocol.out_of_range == "zero":
        plat = np.where(np.abs(plat) > 90.0, 0.0, plat)
        plon = np.where(np.abs(plon) > 180.0, 0.0, plon)
    if protocol.unparsed_point is not None:
        missing = ~(np.isfinite(plat) & np.isfinite(plon))
        plat = np.where(missing, protocol.unparsed_point[0], plat)
        plon = np.where(missing, protocol.unparsed_point[1], plon)
    return plat, plon


CountryBatch = Callable[
    [NDArray[np.float64], NDArray[np.float64]], tuple[NDArray[np.object_], NDArray[np.bool_]]
]


def polygon_country_hits(
    country_batch: CountryBatch,
    plat: NDArray[np.float64],
    plon: NDArray[np.float64],
    tlat: NDArray[np.float64],
    tlon: NDArray[np.float64],
) -> NDArray[np.bool_]:
    """PIGEON's ``country_accuracy``: the truth's country polygon must contain the prediction.

    The truth's country is the polygon covering it, else the nearest one (``sindex.nearest``);
    a prediction off every coast is in no polygon and misses. ``country_batch`` answers
    (code, on_land) per point with exactly that nearest-polygon fallback.
    """
    if not plat.size:
        return np.zeros(0, dtype=bool)
    codes, on_land = country_batch(np.concatenate([plat, tlat]), np.concatenate([plon, tlon]))
    pred, truth = codes[: plat.size], codes[plat.size :]
    return np.asarray((pred == truth) & (truth != "") & on_land[: plat.size], dtype=bool)
