"""`geosleuth score` on peers' files as they are distributed (issue 28).

The GeoEstimation files here follow the released per-image results byte for byte in shape
(``img_id, gt_lat, predicted_lat, gt_long, predicted_long, great_circle_distance``, a blank
line, then a summary header and row); their values are made up so every figure can be derived
by hand. On the equator one degree of longitude is 6371 · π / 180 = 111.19493 km (haversine,
R = 6371 km, as GeoEstimation's ``vectorized_gc_distance``), so the five predictions lie 0.5,
10, 100, 500 and 3000 km east of their truth: Acc@1/25/200/750/2500 km (``d <= k``) =
20 / 40 / 60 / 80 / 80 %, mean (0.5 + 10 + 100 + 500 + 3000) / 5 = 722.1 km.

Checked by hand against the paper as well (not in the suite: GeoEstimation's files are GPL-3.0):
``results/im2gps3k/ISNs_M-fstar-S3.csv`` of TIBHannover/GeoEstimation (commit 6bedd89) scores
10.54 / 27.99 / 36.64 / 49.68 / 65.97 %, mean 3223.12 km under ``--protocol geoestimation``
(alone, with ``--truth meta/im2gps3k_places365.csv`` and with the 2018 ``im2gps3k_places365.csv``),
as in its own summary row and Table 3 of Müller-Budack et al. (ECCV 2018): 10.5 / 28.0 / 36.6 /
49.7 / 66.0; ``results/im2gps/ISNs_M-fstar-S3.csv``: 16.88 / 43.04 / 51.90 / 66.67 / 80.17 %,
mean 1732.86 km (paper: 16.9 / 43.0 / 51.9 / 66.7 / 80.2).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from test_scoring_cli import run

DEG_KM = 6371.0 * math.pi / 180.0
OFFSETS_KM = (0.5, 10.0, 100.0, 500.0, 3000.0)
IDS = [f"{1000 + i}_ab12cd_{i}_1234@N00.jpg" for i in range(len(OFFSETS_KM))]
EXPECTED = {"acc@1km": 20.0, "acc@25km": 40.0, "acc@200km": 60.0, "acc@750km": 80.0, "acc@2500km": 80.0}
SUMMARY_BLOCK = (
    "\nstreet acc (1km),city acc (25km),region acc (200km),country acc (750km),"
    "continent acc (2500km),mean deviation (km)\n0.2,0.4,0.6,0.8,0.8,722.10\n"
)


def _predicted_lon(i: int) -> float:
    return round(10.0 + OFFSETS_KM[i] / DEG_KM, 6)


def geoestimation_file(path: Path, header: str | None = None) -> Path:
    """GeoEstimation's released per-image results, in its column order, with its summary block."""
    lines = [header or "img_id,gt_lat,predicted_lat,gt_long,predicted_long,great_circle_distance"]
    for i, sid in enumerate(IDS):
        lines.append(f"{sid},0.0,0.000000,10.0,{_predicted_lon(i):.6f},{OFFSETS_KM[i]:.2f}")
    path.write_text("\n".join(lines) + "\n" + SUMMARY_BLOCK, encoding="utf-8")
    return path


def scored(*args: str) -> dict:
    code, out, err = run(*args, "--json")
    assert code == 0, err
    return json.loads(out)


def assert_expected(payload: dict) -> None:
    assert payload["n"] == 5 and payload["parsed"] == 5
    for name, value in EXPECTED.items():
        assert payload["metrics"][name] == pytest.approx(value)


def test_geoestimation_results_as_released(tmp_path: Path) -> None:
    payload = scored(str(geoestimation_file(tmp_path / "ISNs.csv")), "--protocol", "geoestimation")
    assert_expected(payload)
    assert payload["metrics"]["mean_km"] == pytest.approx(722.1, abs=0.01)
    (note,) = [w for w in payload["warnings"] if "summary block" in w]
    assert note.startswith(f"{tmp_path / 'ISNs.csv'}:8: ") and "street acc (1km)" in note


def test_a_renamed_header_does_not_make_the_summary_row_a_sample(tmp_path: Path) -> None:
    path = geoestimation_file(tmp_path / "renamed.csv", "id,true_lat,pred_lat,true_lon,pred_lon,distance")
    payload = scored(str(path), "--protocol", "geoestimation")
    assert_expected(payload)
    assert any("summary block" in w for w in payload["warnings"])


@pytest.mark.parametrize(
    "header",
    [
        "IMG_ID,GT_LAT,PRED_LAT,GT_LON,PRED_LON,d",
        "image,true_latitude,predicted_latitude,true_longitude,predicted_longitude,d",
        "img_id,gt_Latitude,pred_lat,gt_lng,pred_lng,d",
        "id,true_lat,predicted_lat,true_long,predicted_long,d",
    ],
)
def test_common_column_namings(tmp_path: Path, header: str) -> None:
    payload = scored(str(geoestimation_file(tmp_path / "p.csv", header)), "--protocol", "geoestimation")
    assert_expected(payload)


def test_a_blank_line_inside_the_rows_is_no_summary(tmp_path: Path) -> None:
    path = geoestimation_file(tmp_path / "p.csv")
    lines = path.read_text().splitlines()
    path.write_text("\n".join([*lines[:3], "", *lines[3:6]]) + "\n")  # no block after the rows
    payload = scored(str(path), "--protocol", "geoestimation")
    assert_expected(payload)
    assert not any("summary block" in w for w in payload["warnings"])


def test_columns_maps_other_names(tmp_path: Path) -> None:
    path = geoestimation_file(tmp_path / "odd.csv", "photo,t_y,y_hat,t_x,x_hat,err")
    code, _, err = run(str(path), "--protocol", "geoestimation")
    assert code == 1 and "no row carries ground truth" in err
    mapping = "id=photo,true_lat=t_y,pred_lat=y_hat"
    payload = scored(
        str(path),
        "--protocol",
        "geoestimation",
        "--columns",
        mapping,
        "--columns",
        "true_lon=t_x,pred_lon=x_hat",
    )
    assert_expected(payload)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pred_lat", "expected NAME=COLUMN"),
        ("latitude=y_hat", "'latitude' is not one of id, pred_lat"),
        ("pred_lat=y_hat,pred_lon=y_hat", "mapped twice"),
    ],
)
def test_bad_columns_stop_before_scoring(tmp_path: Path, spec: str, message: str) -> None:
    path = geoestimation_file(tmp_path / "odd.csv", "photo,t_y,y_hat,t_x,x_hat,err")
    code, out, err = run(str(path), "--columns", spec)
    assert code == 2 and message in err and out == ""


def test_a_mapped_column_the_file_lacks_names_the_columns_it_has(tmp_path: Path) -> None:
    path = geoestimation_file(tmp_path / "odd.csv", "photo,t_y,y_hat,t_x,x_hat,err")
    code, _, err = run(str(path), "--columns", "pred_lat=yhat,pred_lon=x_hat")
    assert code == 1 and "'yhat', not a column of this file (it has photo, t_y, y_hat" in err


TRUTH_2020 = "IMG_ID,AUTHOR,LAT,LON,S3_Label,S16_Label,S365_Label,Prob_indoor,Prob_natural,Prob_urban"
TRUTH_2018 = "IMG_ID,AUTHOR,LON,LAT,S3_Label,S16_Label,S365_Label,Prob_indoor,Prob_natural,Prob_urban"


def truth_file(path: Path, header: str) -> Path:
    """IM2GPS3K's released truth (``im2gps3k_places365.csv``): latitude in the third column, always."""
    rows = [f"{sid},1234@N00,0.0,10.0,1,2,3,0.1,0.2,0.7" for sid in IDS]
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def predictions_only(path: Path) -> Path:
    rows = [f"{sid},0.0,{_predicted_lon(i):.6f}" for i, sid in enumerate(IDS)]
    path.write_text("\n".join(["img_id,predicted_lat,predicted_long", *rows]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("header", [TRUTH_2020, TRUTH_2018])
def test_truth_from_the_released_im2gps3k_csv(tmp_path: Path, header: str) -> None:
    truth = truth_file(tmp_path / "im2gps3k_places365.csv", header)
    payload = scored(
        str(predictions_only(tmp_path / "p.csv")), "--protocol", "geoestimation", "--truth", str(truth)
    )
    assert_expected(payload)
    swapped = [w for w in payload["warnings"] if "2018 header" in w]
    assert len(swapped) == (header == TRUTH_2018)


def test_truth_rows_without_a_prediction_count_as_wrong(tmp_path: Path) -> None:
    truth = truth_file(tmp_path / "im2gps3k_places365.csv", TRUTH_2020)
    preds = predictions_only(tmp_path / "p.csv")
    preds.write_text("\n".join(preds.read_text().splitlines()[:-1]) + "\n")  # the 3000 km row is gone
    payload = scored(str(preds), "--protocol", "geoestimation", "--truth", str(truth))
    assert payload["n"] == 5 and payload["metrics"]["acc@2500km"] == 80.0
    assert any("1 sample(s) of" in w and repr(IDS[4]) in w for w in payload["warnings"])


def test_a_row_with_a_field_missing_is_a_failed_row(tmp_path: Path) -> None:
    path = geoestimation_file(tmp_path / "p.csv")
    lines = path.read_text().splitlines()
    lines[2] = lines[2].rsplit(",", 1)[0]  # five fields under a six-column header
    path.write_text("\n".join(lines) + "\n")
    payload = scored(str(path), "--protocol", "geoestimation")
    assert payload["n"] == 5 and payload["parsed"] == 4
    assert payload["metrics"]["acc@25km"] == 20.0  # the 10 km row is the failed one
    assert any("p.csv:3: 5 fields where the header has 6" in w for w in payload["warnings"])


def test_level_metrics_without_labels_are_null_not_zero(tmp_path: Path) -> None:
    """GeoVista's country / state / city need place names; coordinates alone cannot give them."""
    path = tmp_path / "coords.jsonl"
    rows = [
        {
            "id": i,
            "response": "The answer is Paris.\nLatitude: 48.85, Longitude: 2.35",
            "lat": 48.85,
            "lon": 2.35,
        }
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    payload = scored(str(path), "--protocol", "geovista")
    for name in ("acc_country", "acc_state", "acc_city", "all_acc_country"):
        assert payload["metrics"][name] is None and payload["ci95"][name] == [None, None]
    note = "acc_state / all_acc_state: no row has a label for admin1 or city, so the metric is not available"
    assert any(w.startswith(note) for w in payload["warnings"])
    code, out, err = run(str(path), "--protocol", "geovista", "--csv")
    cells = {r.split(",")[2]: r.split(",")[3] for r in out.splitlines()[1:]}
    assert code == 0 and cells["acc_country"] == "" and "not 0" in err
    code, out, _ = run(str(path), "--protocol", "geovista")
    assert code == 0 and "0.00 %" not in out.split("acc_country", 1)[1].splitlines()[0]


def test_geovista_credits_state_from_a_city_label(tmp_path: Path) -> None:
    """The released fix-up: a correct city credits state and country, so city labels make them defined."""
    path = tmp_path / "cities.jsonl"
    truth = {"lat": 48.85, "lon": 2.35, "city": "Paris"}
    path.write_text(json.dumps({"id": 1, "response": "It is Paris.", "ground_truth": truth}) + "\n")
    payload = scored(str(path), "--protocol", "geovista")
    assert payload["metrics"]["acc_city"] == payload["metrics"]["acc_state"] == 100.0
    assert not any("no row has a label" in w for w in payload["warnings"])


def test_default_leaves_out_a_level_no_row_is_labelled_with_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    truth = {"lat": 48.85, "lon": 2.35, "country": "France", "city": "Paris"}
    path.write_text(json.dumps({"id": 1, "response": "Paris, France", "ground_truth": truth}) + "\n")
    payload = scored(str(path), "--protocol", "default")
    assert payload["metrics"]["text_acc_country"] == 100.0 and payload["metrics"]["text_acc_city"] == 100.0
    assert "text_acc_admin1" not in payload["metrics"]
    assert [w for w in payload["warnings"] if "no row has a label" in w] == [
        "text_acc_admin1: no row has a label for admin1, so the metric is not available"
    ]
