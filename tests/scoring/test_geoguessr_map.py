"""``--protocol geoguessr-map``: ccmdi's GeoBench scoring on a map whose diagonal is computed by hand.

The map runs along the equator from (0, 0) to (0, 90): its haversine diagonal is a quarter of a
great circle, D = 6371.0088 · π/2 = 10007.557 km, and its scale D / 7.458421 = 1341.780 km. A
guess Δ degrees east of its truth on the equator is Δ · D/90 km off, so its exponent
metres / scale = 1000 · 7.458421 · Δ/90 = 82.871344 · Δ, whatever the Earth's radius:

    Δ = 1°:    0.99866017^82.871344 = e^(82.871344 · ln 0.99866017) = e^−0.111108 = 0.894842 → 4474
    Δ = 10°:   0.99866017^828.71344 = e^−1.111083 = 0.329203 → 1646.02 → 1646
    Δ = 0.5°:  0.99866017^41.435672 = e^−0.0555541 = 0.945961 → 4729.80 → 4730
    Δ = 0:     within 25 m → 5000

(ln 0.99866017 = −0.00134073.) Five locations: 1° off with an alias of the right country, 10° off
with an alias, 0.5° off in the wrong country, a refusal, an exact guess:

    refusal_rate = 1/5 = 20 %, acc_country = 3/5 = 60 %
    points of the four answers 4474, 1646, 4730, 5000: mean 15850/4 = 3962.5,
      median sorted(x)[4 // 2] = [1646, 4474, 4730, 5000][2] = 4730 (np.median would say 4602)
    km 111.195, 1111.951, 55.598, 0: mean 1278.744/4 = 319.686, median [0, 55.6, 111.2, 1112.0][2] = 111.195
"""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.parsing.geobench import released_geobench
from geosleuth.scoring import get_protocol, score_file
from geosleuth.scoring.geoguessr_map import MapBounds, parse_bounds, points, same_country

QUARTER_KM = 6371.0088 * math.pi / 2  # 10007.557
DEG_KM = QUARTER_KM / 90  # 111.195
# id, truth country, truth lng, guess country, guess lng (None: refused); every point on the equator
LOCATIONS = [
    ("1", "Gabon", 10.0, "gabonese republic", 11.0),
    ("2", "Congo (the Democratic Republic of the)", 20.0, "DRC", 30.0),
    ("3", "Kenya", 40.0, "Tanzania", 40.5),
    ("4", "Somalia", 50.0, None, None),
    ("5", "Maldives", 60.0, "Maldives", 60.0),
]
EXPECTED = {
    "refusal_rate": 20.0,
    "acc_country": 60.0,
    "geoguessr_mean": 3962.5,
    "geoguessr_median": 4730.0,
    "mean_km": (1 + 10 + 0.5 + 0) * DEG_KM / 4,
    "median_km": DEG_KM,
}


def _metadata(folder: Path) -> Path:
    """GeoBench's dataset.py output: bounds from the game, one entry per saved image."""
    folder.mkdir(parents=True, exist_ok=True)
    images = [
        {"image_path": f"images/{sid}.jpg", "country": country, "lat": 0.0, "lng": lng}
        for sid, country, lng, _, _ in LOCATIONS
    ]
    data = {"bounds": {"min": {"lat": 0.0, "lng": 0.0}, "max": {"lat": 0.0, "lng": 90.0}}, "images": images}
    (folder / "metadata.json").write_text(json.dumps(data, indent=2))
    return folder / "metadata.json"


def _detailed(path: Path, scores: dict[str, str] | None = None) -> Path:
    """detailed.csv as pandas writes GeoBench's records (NaN guesses empty, floats with .0)."""
    header = [
        "location_id", "country_true", "lat_true", "lng_true", "refused", "error_message",
        "country_guess", "lat_guess", "lng_guess", "distance_km", "score", "country_correct",
    ]  # fmt: skip
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        for sid, country, lng, guess, guess_lng in LOCATIONS:
            if guess is None:
                writer.writerow(
                    [sid, country, 0.0, lng, True, "Format error: missing", "", "", "", "", "", ""]
                )
                continue
            score = (scores or {}).get(sid, "")
            writer.writerow([sid, country, 0.0, lng, False, "", guess, 0.0, guess_lng, "", score, ""])
    return path


def _score(*args: str) -> dict:
    result = CliRunner().invoke(app, ["score", *args, "--protocol", "geoguessr-map", "--json"])
    assert result.exit_code == 0, result.output
    return (
        json.loads(result.output)[0] if result.output.lstrip().startswith("[") else json.loads(result.output)
    )


def _metrics(body: dict) -> dict[str, float]:
    return body.get("metrics") or body["score"]["metrics"]


def _check(metrics: dict[str, float]) -> None:
    for name, value in EXPECTED.items():
        assert metrics[name] == pytest.approx(value, abs=1e-3), name


def test_map_diagonal_and_scale_by_hand() -> None:
    bounds = MapBounds(0.0, 0.0, 0.0, 90.0)
    assert bounds.diagonal_km() == pytest.approx(QUARTER_KM, abs=1e-9)  # 10007.557 km
    assert bounds.scale == pytest.approx(QUARTER_KM / 7.458421, abs=1e-9)  # 1341.780 km
    # a meridian quarter is the same length: (0, 0) to (90, 0)
    assert MapBounds(0.0, 0.0, 90.0, 0.0).diagonal_km() == pytest.approx(QUARTER_KM, abs=1e-9)


def test_points_by_hand() -> None:
    scale = MapBounds(0.0, 0.0, 0.0, 90.0).scale
    got = points(np.array([DEG_KM, 10 * DEG_KM, 0.5 * DEG_KM, 0.0, 0.025, 0.0251]), scale)
    # 25 m is still full marks; 25.1 m: 5000 · 0.99866017^(25.1 / 1341780) = 4999.87 → 5000 too
    assert got.tolist() == [4474.0, 1646.0, 4730.0, 5000.0, 5000.0, 5000.0]


def test_countries_through_geobench_alias_groups() -> None:
    assert same_country("Hong Kong", "china")  # territories fold into their state, as GeoBench's groups
    assert same_country(" USA ", "Puerto Rico")
    assert same_country("Narnia", "narnia")  # equal names match even outside the groups
    assert not same_country("Austria", "Australia")
    assert not same_country("", "")


def test_detailed_csv_with_map_file(tmp_path: Path) -> None:
    meta = _metadata(tmp_path / "map")
    body = _score(str(_detailed(tmp_path / "detailed.csv")), "--map", str(meta))
    _check(_metrics(body))


def test_detailed_csv_with_map_bounds(tmp_path: Path) -> None:
    body = _score(str(_detailed(tmp_path / "detailed.csv")), "--map-bounds", "0,0,0,90")
    _check(_metrics(body))


def test_a_score_column_from_another_map_is_reported(tmp_path: Path) -> None:
    path = _detailed(tmp_path / "detailed.csv", {"1": "4474.0", "2": "1700.0"})
    body = _score(str(path), "--map-bounds", "0,0,0,90")
    assert any("1 row(s) score differently" in w for w in body.get("warnings") or body["score"]["warnings"])


def test_answers_read_with_geobench_regex_and_truth_from_the_map(tmp_path: Path) -> None:
    meta = _metadata(tmp_path / "map")
    rows = []
    for sid, _, _, guess, guess_lng in LOCATIONS:
        text = (
            "I cannot tell."
            if guess is None
            else f"Signs in French.\ncountry: {guess}\nlat: 0.0\nlng: {guess_lng}"
        )
        rows.append(json.dumps({"id": sid, "response": text}))
    (tmp_path / "p.jsonl").write_text("\n".join(rows) + "\n")
    _check(_metrics(_score(str(tmp_path / "p.jsonl"), "--map", str(meta))))


def test_the_map_file_as_truth_brings_its_bounds(tmp_path: Path) -> None:
    meta = _metadata(tmp_path / "map")
    rows = [json.dumps({"id": "5", "response": "country: Maldives\nlat: 0\nlng: 60"})]
    (tmp_path / "p.jsonl").write_text("\n".join(rows) + "\n")
    metrics = _metrics(_score(str(tmp_path / "p.jsonl"), "--truth", str(meta)))
    assert metrics["geoguessr_mean"] == 5000.0 and metrics["map_diagonal_km"] == pytest.approx(
        QUARTER_KM, abs=1e-3
    )


def test_a_map_folder_as_truth_as_the_harnesses_pass_it(tmp_path: Path) -> None:
    """inspect / lmms-eval hand the dataset's path (the map folder) to a protocol's own file scorer."""
    meta = _metadata(tmp_path / "map")
    rows = [json.dumps({"id": sid, "response": "country: Gabon\nlat: 0\nlng: 11"}) for sid in ("1", "4")]
    (tmp_path / "p.jsonl").write_text("\n".join(rows) + "\n")
    metrics = score_file(
        tmp_path / "p.jsonl", get_protocol("geoguessr-map"), truth_path=meta.parent
    ).score.metrics
    # row 1: 1° off, Gabon (4474 points, country right); row 4: Somalia at lng 50, guess at lng 11: 39°
    # off, 0.99866017^(82.871344 · 39) = e^−4.333 → 65.6 → 66 points, country wrong
    assert metrics["acc_country"] == 50.0 and metrics["geoguessr_mean"] == pytest.approx((4474 + 66) / 2)


def test_without_a_map_scoring_stops_and_says_how(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["score", str(_detailed(tmp_path / "d.csv")), "--protocol", "geoguessr-map"]
    )
    assert result.exit_code == 1 and "--map metadata.json" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--protocol", "twm", "--map-bounds", "0,0,0,90"], "apply to --protocol geoguessr-map"),
        (["--protocol", "geoguessr-map", "--map-bounds", "0,0,90"], "four numbers"),
        (["--protocol", "geoguessr-map", "--map-bounds", "0,0,0,0"], "no size"),
        (["--protocol", "geoguessr-map", "--map-bounds", "0,0,95,0"], "outside"),
    ],
)
def test_bad_map_options(tmp_path: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(app, ["score", str(_detailed(tmp_path / "d.csv")), *args])
    assert result.exit_code == 2 and message in result.output


def test_parse_bounds() -> None:
    assert parse_bounds(" -10.5, 20,30 ,40") == MapBounds(-10.5, 20.0, 30.0, 40.0)


# GeoBench's parse_response regex, as released (scripts/parser.py): the reference for the split search.
RELEASED = re.compile(
    r"(?:^|\n)(?:\*\*)?(?:country|Country)(?:\*\*)?:\s*(\*+)?\s*([^,\r\n]+?)\s*(\*+)?\s*(?:\n|$)"
    r".*?"
    r"(?:^|\n)(?:\*\*)?(?:lat|Lat)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)"
    r".*?"
    r"(?:^|\n)(?:\*\*)?(?:lng|Lng)(?:\*\*)?:\s*(\*+)?\s*([-+]?\d+\.?\d*?)\s*(\*+)?\s*(?:\n|$)",
    re.MULTILINE | re.DOTALL,
)


def _released(text: str) -> tuple[str, float, float] | None:
    match = RELEASED.search(text)
    if match is None:
        return None
    lat, lng = float(match.group(5).strip()), float(match.group(8).strip())
    if not (-90 <= lat <= 90 and -180 <= lng <= 180):
        return None  # parse_response raises: a refusal
    return match.group(2).strip(), lat, lng


LINES = st.sampled_from(
    [
        "country: France", "Country: **Spain**", "**country**: Peru", "country: France, Paris", "country:",
        "lat: 48.85", "Lat: -12", "lat: 91.5", "lat: 48.85°", "**Lat**: *3.5*", "lat: 7.",
        "lng: 2.35", "Lng: +100", "lng: 200", "lng: 2,35", "LNG: 5",
        "I think it is", "", "country: Chile lat: 3", "  ", " \t ", "\r", "lat:\n4.5",
        "country:  New  Zealand  ", "country: *", "lng: 7 ", "**", "France, Paris",
    ]
)  # fmt: skip


@settings(max_examples=600, deadline=None)
@given(st.lists(LINES, max_size=12))
def test_split_search_finds_what_the_released_regex_finds(lines: list[str]) -> None:
    text = "\n".join(lines)
    found = released_geobench(text)
    got = None if found is None else (found.fields["country"], found.lat, found.lon)
    assert got == _released(text), text
