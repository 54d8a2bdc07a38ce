"""WhereBench end to end on a few rows written in exactly the released layouts.

Expected numbers are worked out by hand from the paper and the released evaluation code
(``wherestreet/eval_gemini_flash.py``, ``wherecountry/eval_gemini_25_flash.py``), never from
the code under test: Acc@k counts ``0 < d <= k``, WhereCountry accuracy as published is over
parsed answers, the reweighted thinking score is Σ wᵢ·sᵢ (Eq. 5) and Overall is Eq. 2.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from eval_data import make_image, write_plan
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.records import Prediction
from geosleuth.eval.datasets.loading import load_dataset
from geosleuth.eval.report.summary import percent_summary
from geosleuth.eval.wherebench import rules as wb
from geosleuth.scoring import get_protocol, score_file

# The released header lines and rows of our own in the released cell formats.
WHERECOUNTRY_CSV = """nation,panoID,options,answer-type
Vatican,CAoSLEFGMVFpcE95NmZiRjA1MWZXNDk1Q2tuNVJMd0pndVpGUV9Db0FZMkJTS21u,"['Italy', 'San Marino', 'Monaco']",country
Portugal,OC7wNOoNM79aK0JfB5-L5Q,"['Spain', 'Morocco', 'France']",country
Serbia,fRlOCIlcGeL75dzrP_OjMg,"['Hungary', 'Romania', 'Bulgaria']",country
Swaziland,S073exLYc2y2egczoP4ShA,"['Mozambique', 'South Africa']",country
"""  # noqa: E501 - the released rows are long

WHERESTREET_CSV = """BVID,key_clues,answer,answer_type,hint
BV1u94y1L74z,"[""Evergreen trees point to southern China."", ""A scooter shadow gives the road axis."", ""A white arched bridge crosses a river."", ""Many mini electric cars point to Liuzhou.""]","Liuzhou, Guangxi, China",city,"[""The image is taken in China""]"
BV1tz4y1x7aj,"[""An elevated railway."", ""A red flag."", ""Two Chinese characters."", ""Karst mountains.""]","Douguan Station, Guiyang, Guizhou, China",street,"[""The image is taken in China.""]"
BV1Em4y137pm,"[""Cars drive on the left.""]",Bangladesh,country,"[""The image is taken in one of the four countries: A: India B: Burundi C: Pakistan D: Bangladesh""]"
BV1Mo4y1F7V4,"[""A river bend.""]","23.70, 113.07",latitude & longitude,"[""This photo was taken on May 4th in Qingyuan City, Guangdong Province, China.""]"
BV1q2oHYgEwp,"[""A canal."", ""Flat farmland.""]","33.62, 119.11",latitude & longitude,"[""The image is taken in Jiangsu Province.""]"
013-seg6,"[""A baroque fountain."", ""Maltese buses.""]","Triton Fountain, Valletta, Malta",street,[]
003-seg2,"[""A beach promenade.""]","16.0993, 108.2768",latitude & longitude,[]
011-geopeter-seg2,"[""Canal houses.""]","52.3771, 4.8982",latitude & longitude,[]
023-geodetect-seg2,"[""A sign says heat kills.""]","35.9816, −114.8347",latitude & longitude,"[""A blurry sign in the background says \\""heat kills\\"".""]"
"""  # noqa: E501 - the released rows are long

WEIGHTS = {
    "BV1u94y1L74z": [0.179, 0.046, 0.121, 0.654],
    "BV1tz4y1x7aj": [0.2875, 0.0958, 0.0958, 0.5208],
    "BV1Em4y137pm": [0.5],  # does not sum to 1, as 53 released vectors do not
    "BV1Mo4y1F7V4": [1.0],
    "BV1q2oHYgEwp": [0.25, 0.25],
    "013-seg6": [0.6, 0.4],
    "003-seg2": [1.0],
    "011-geopeter-seg2": [1.0],
    "023-geodetect-seg2": [1.0],
}

# image file per id: any common extension in any case, and WhereCountry's "_panoramic" names
IMAGES = {
    "CAoSLEFGMVFpcE95NmZiRjA1MWZXNDk1Q2tuNVJMd0pndVpGUV9Db0FZMkJTS21u": "_panoramic.jpg",
    "OC7wNOoNM79aK0JfB5-L5Q": ".JPG",
    "fRlOCIlcGeL75dzrP_OjMg": ".png",
    "S073exLYc2y2egczoP4ShA": ".webp",
    "BV1u94y1L74z": ".jpg",
    "BV1tz4y1x7aj": ".jpeg",
    "BV1Em4y137pm": ".PNG",
    "BV1Mo4y1F7V4": ".Webp",
    "BV1q2oHYgEwp": ".jpg",
    "013-seg6": ".jpg",
    "003-seg2": ".jpg",
    "011-geopeter-seg2": ".jpg",
    # 023-geodetect-seg2 has no image: listed by validate, recorded failed by eval
}


def _release(root: Path) -> Path:
    """The released repository layout: wherecountry/, wherestreet/ (with weights), images by id."""
    (root / "wherecountry").mkdir(parents=True)
    (root / "wherestreet").mkdir()
    (root / "wherecountry" / "wherecountry_500.csv").write_text(WHERECOUNTRY_CSV, encoding="utf-8")
    (root / "wherestreet" / "all.csv").write_text(WHERESTREET_CSV, encoding="utf-8")
    (root / "wherestreet" / "gt_key_clues_weight.json").write_text(json.dumps(WEIGHTS))
    for i, (sample_id, suffix) in enumerate(IMAGES.items()):
        make_image(root / "imgs" / f"{sample_id}{suffix}", i)
    return root


@pytest.fixture()
def release(tmp_path: Path) -> Path:
    return _release(tmp_path / "EarthWhere")


def test_released_tables_load_as_they_are(release: Path) -> None:
    country = load_dataset(release / "wherecountry" / "wherecountry_500.csv", images=release / "imgs")
    assert country.format == "wherecountry" and country.problems == [] and country.missing_images == []
    by_id = {s.id: s for s in country.samples}
    vatican = by_id["CAoSLEFGMVFpcE95NmZiRjA1MWZXNDk1Q2tuNVJMd0pndVpGUV9Db0FZMkJTS21u"]
    assert sorted(vatican.choices) == ["Italy", "Monaco", "San Marino", "Vatican"]
    assert vatican.choices["ABCD".index(vatican.answer)] == "Vatican"
    assert vatican.image.endswith("_panoramic.jpg")
    assert by_id["OC7wNOoNM79aK0JfB5-L5Q"].image.endswith(".JPG")
    swazi = by_id["S073exLYc2y2egczoP4ShA"]  # the release has rows with two distractors
    assert len(swazi.choices) == 3 and swazi.choices["ABC".index(swazi.answer)] == "Swaziland"

    street = load_dataset(release / "wherestreet" / "all.csv", images=release / "imgs")
    assert street.format == "wherestreet" and street.problems == []
    assert [str(p) for p in street.missing_images] == [
        "row 9 (id 023-geodetect-seg2): image not found: "
        "no 023-geodetect-seg2.{jpg/jpeg/png/webp} (any case) in the image folder"
    ]
    s = {x.id: x for x in street.samples}
    assert len(s) == 9  # the sample without an image stays: a run records it as failed
    liuzhou = s["BV1u94y1L74z"]
    assert (liuzhou.split, liuzhou.answer_type, liuzhou.answer_level) == ("bilibili", "level", "city")
    assert liuzhou.labels == {"country": "China", "admin1": "Guangxi", "city": "Liuzhou"}
    assert liuzhou.hint == "The image is taken in China" and liuzhou.hint_level == "country"
    assert liuzhou.clue_weights == WEIGHTS["BV1u94y1L74z"] and len(liuzhou.key_clues) == 4
    douguan = s["BV1tz4y1x7aj"]
    assert douguan.labels == {
        "country": "China",
        "admin1": "Guizhou",
        "city": "Guiyang",
        "street": "Douguan Station",
    }
    assert s["BV1Em4y137pm"].hint_level is None  # four candidate countries give nothing away
    assert s["013-seg6"].split == "youtube" and s["013-seg6"].hint is None
    assert (s["BV1Mo4y1F7V4"].answer_type, s["BV1Mo4y1F7V4"].lat, s["BV1Mo4y1F7V4"].lon) == (
        "coordinates",
        23.70,
        113.07,
    )
    assert s["023-geodetect-seg2"].lon == -114.8347  # a typographic minus sign, as released


def test_validate_lists_missing_images(release: Path) -> None:
    runner = CliRunner()
    table = str(release / "wherestreet" / "all.csv")
    bad = runner.invoke(app, ["datasets", "validate", table, "--images", str(release / "imgs")])
    assert bad.exit_code == 1
    assert "9 valid sample(s), 0 problem(s), 1 missing image(s)" in bad.output
    assert "id 023-geodetect-seg2): image not found" in bad.output
    make_image(release / "imgs" / "023-geodetect-seg2.jpg", 99)
    ok = runner.invoke(app, ["datasets", "validate", table, "--images", str(release / "imgs")])
    assert ok.exit_code == 0, ok.output


# Predictions for the score tests. By hand:
# WhereCountry: Vatican right, Portugal wrong (Spain), Serbia right, Swaziland never answered.
#   as published (over parsed): 2/3; every row: 2/4.
# WhereStreet text, bilibili (hint "China" gives the country away, so paths start at province):
#   Liuzhou: province, city right -> 2/2 = 1; Douguan: province, city right, street wrong -> 2/3;
#   Bangladesh: the hint lists four countries, path = [country], right -> 1.   mean 8/9.
# WhereStreet text, YouTube: Triton Fountain, no hint: path country, Valletta, street -> 2/3.
# Coordinates, bilibili: d = 0 (not counted: 0 < d), d = R·0.01° = 1.112 km (> 1, <= 5). Acc@1 0, Acc@5 1/2.
# Coordinates, YouTube: d = R·0.005° = 0.556 km, one unanswered, one with no prediction:
#   Acc@1 = 1/3.
# Overall (Eq. 2) = (4·2/3 + 3·8/9 + 1·2/3 + 2·0 + 3·1/3) / (4 + 3 + 1 + 2 + 3) = 7/13.
# Every row: WhereCountry 1/2 -> (2 + 8/3 + 2/3 + 0 + 1) / 13 = 19/39.
POOLED = [
    {"id": "CAoSLEFGMVFpcE95NmZiRjA1MWZXNDk1Q2tuNVJMd0pndVpGUV9Db0FZMkJTS21u", "predicted": "Vatican"},
    {"id": "OC7wNOoNM79aK0JfB5-L5Q", "predicted": "Spain"},
    {"id": "fRlOCIlcGeL75dzrP_OjMg", "predicted": "Serbia"},
    {"id": "BV1u94y1L74z", "response": "<think>mini EVs</think><answer>Liuzhou, Guangxi, China</answer>"},
    {"id": "BV1tz4y1x7aj", "response": "<answer>Zhongshan Road, Guiyang, Guizhou, China</answer>"},
    {"id": "BV1Em4y137pm", "response": "<answer>Bangladesh</answer>"},
    {"id": "BV1Mo4y1F7V4", "response": "<answer>(23.70, 113.07)</answer>"},
    {"id": "BV1q2oHYgEwp", "response": "<answer>(33.63, 119.11)</answer>"},
    {"id": "013-seg6", "response": "<answer>Valletta, Malta</answer>"},
    {"id": "003-seg2", "response": "<answer>16.1043, 108.2768</answer>"},
    {"id": "011-geopeter-seg2", "response": "I cannot tell."},
]


def test_score_pooled_predictions_overall_by_hand(release: Path, tmp_path: Path) -> None:
    preds = tmp_path / "pooled.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in POOLED))
    result = score_file(preds, get_protocol("wherebench"), truth_path=release)
    m = result.score.metrics
    assert result.score.n == 13
    assert m["acc_wherecountry_as_published"] == pytest.approx(100 * 2 / 3, abs=1e-3)
    assert m["acc_wherecountry_every_row"] == 50.0
    assert m["path_score_bilibili"] == pytest.approx(100 * 8 / 9, abs=1e-3)
    assert m["path_score_youtube"] == pytest.approx(100 * 2 / 3, abs=1e-3)
    assert m["acc@1km_bilibili"] == 0.0 and m["acc@5km_bilibili"] == 50.0
    assert m["acc@1km_youtube"] == pytest.approx(100 / 3, abs=1e-3)
    assert m["overall_eq2"] == pytest.approx(100 * 7 / 13, abs=1e-3)
    # released Overall: per split the mean answer score, a coordinate item scoring
    # exp(−(d/0.1)^1.3): d = 0 scores 1, 1.112 km and 0.556 km next to nothing, unanswered 0
    far, near = 6371 * math.radians(0.01), 6371 * math.radians(0.005)
    bilibili = 1 + 2 / 3 + 1 + 1 + math.exp(-((far / 0.1) ** 1.3))
    youtube = 2 / 3 + math.exp(-((near / 0.1) ** 1.3)) + 0 + 0
    assert m["overall"] == pytest.approx(100 * (4 * 2 / 3 + bilibili + youtube) / 13, abs=1e-3)
    lo, hi = result.score.ci95["acc_wherecountry_every_row"]
    assert 0.0 <= lo <= 50.0 <= hi <= 100.0
    assert set(result.score.ci95) == {
        "acc_wherecountry_as_published",
        "acc_wherecountry_every_row",
        "path_score_bilibili",
        "path_score_youtube",
    }
    assert any("S073exLYc2y2egczoP4ShA" in w and "differ" in w for w in result.score.warnings)
    by_id = {r["id"]: r for r in result.rows}
    assert by_id["BV1tz4y1x7aj"]["level_hits"] == {
        "country": True,
        "admin1": True,
        "city": True,
        "street": False,
    }
    cli = CliRunner().invoke(
        app, ["score", str(preds), "--protocol", "wherebench", "--truth", str(release), "--format", "json"]
    )
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.output)["metrics"]["overall_eq2"] == pytest.approx(100 * 7 / 13, abs=0.01)


def test_released_prediction_files_and_thinking_scores(release: Path, tmp_path: Path) -> None:
    """The released output layouts: WhereCountry CSV of parsed rows, WhereStreet JSON keyed by BVID."""
    country = tmp_path / "gemini_wherecountry_prediction_results.csv"
    country.write_text(
        "panoId,ground_truth,predicted,choices,correct,response\n"
        "OC7wNOoNM79aK0JfB5-L5Q,Portugal,Portugal,\"['Spain', 'Portugal', 'France', 'Morocco']\",True,"
        "<answer>2</answer>\n"
    )
    scored = score_file(
        country, get_protocol("wherebench"), truth_path=release / "wherecountry" / "wherecountry_500.csv"
    )
    assert scored.score.metrics["acc_wherecountry_as_published"] == 100.0  # 1 of 1 parsed
    assert scored.score.metrics["acc_wherecountry_every_row"] == 25.0  # 1 of 4 rows
    street = tmp_path / "gemini_eval_results.json"
    street.write_text(
        json.dumps(
            {
                "BV1u94y1L74z": {
                    "ground_truth": "Liuzhou, Guangxi, China",
                    "answer_type": "city",
                    "predicted": "Liuzhou, Guangxi, China",
                    "thinking_result": [1, 0, 0, 1],
                },
                "BV1Em4y137pm": {"predicted": "Bangladesh", "thinking_result": [1]},
                "BV1q2oHYgEwp": {"predicted": "(33.63, 119.11)", "thinking_result": [0, 1]},
            }
        )
    )
    m = score_file(
        street, get_protocol("wherebench"), truth_path=release / "wherestreet" / "all.csv"
    ).score.metrics
    # plain: mean of 2/4 and 1/1 = 0.75; Shapley Σ w·s: (0.179 + 0.654 = 0.833) and 0.5 -> mean 0.6665
    assert m["thinking_bilibili_text"] == pytest.approx(75.0)
    assert m["thinking_shapley_bilibili_text"] == pytest.approx(100 * (0.833 + 0.5) / 2)
    assert m["thinking_bilibili_coordinates"] == 50.0 and m["thinking_shapley_bilibili_coordinates"] == 25.0


def test_coordinate_answers_are_read_as_released() -> None:
    assert wb.released_coordinates("(23.70, 113.07)") == (23.70, 113.07)
    assert wb.released_coordinates("33.87 S, 151.21 E") == (33.87, 151.21)  # hemisphere letters ignored
    assert wb.released_coordinates("Road 5, No. 12") == (5.0, 12.0)  # any two numbers
    assert wb.released_coordinates("Valletta") is None and wb.released_coordinates("12.") is None
    assert wb.answer_block("<think>1, 2</think><answer> (3, 4) </answer>") == "(3, 4)"


def test_acc_at_k_counts_zero_out_and_k_in() -> None:
    d = [0.0, 1.0, 1.0000001, 5.0, math.nan, 0.3]
    assert wb.hits_open(d, 1.0).tolist() == [False, True, False, False, False, True]
    assert wb.hits_open(d, 5.0).tolist() == [False, True, True, True, False, True]


def test_thinking_score_is_eq5_without_normalising() -> None:
    items = [
        wb.WhereItem("a", "text", "bilibili", clues_used=[True, False, True], clue_weights=[0.2, 0.3, 0.6]),
        wb.WhereItem("b", "text", "bilibili", clues_used=[True], clue_weights=[0.5]),
        wb.WhereItem("c", "text", "bilibili"),  # never judged: counted, not scored
    ]
    figures = wb.thinking_figures(items)
    # plain (2/3 + 1)/2; weighted (0.2 + 0.6 = 0.8, 0.5) -> 0.65, with Σw = 1.1 and 0.5 left as they are
    assert figures["thinking"] == pytest.approx(100 * (2 / 3 + 1) / 2, abs=1e-3)
    assert figures["thinking_shapley"] == pytest.approx(65.0)
    assert (figures["n_judged"], figures["n_items"]) == (2, 3)


def test_overall_eq2_by_hand() -> None:
    items = [
        wb.WhereItem("c1", "wherecountry", parsed=True, correct=True),
        wb.WhereItem("c2", "wherecountry", parsed=False),
        wb.WhereItem("t1", "text", "bilibili", path_score=0.5),
        wb.WhereItem("t2", "text", "youtube", path_score=1.0),
        wb.WhereItem("d1", "coordinates", "youtube", distance_km=0.9),
        wb.WhereItem("d2", "coordinates", "youtube", distance_km=0.0),
    ]
    # paper Eq. 2, coordinates by Acc@1 km (0 < d ≤ 1: d2 = 0 km is no hit)
    # as published p_C = 1/1: (2·1 + 1·0.5 + 1·1 + 2·(1/2)) / 6 = 4.5/6; every row p_C = 1/2: 3.5/6
    assert wb.overall_score(items, coordinates="acc@1km") == pytest.approx(4.5 / 6)
    assert wb.overall_score(items, "accuracy_every_row", coordinates="acc@1km") == pytest.approx(3.5 / 6)
    # released (``run_evaluation``): a coordinate item's answer score is exp(−(d/0.1)^1.3):
    # d1 = 0.9 km gives exp(−9^1.3), d2 = 0 km gives 1; YouTube's mean over its three items
    yt = (1.0 + math.exp(-(9.0**1.3)) + 1.0) / 3
    assert wb.overall_score(items) == pytest.approx((2 * 1.0 + 1 * 0.5 + 3 * yt) / 6)
    assert wb.overall_score(items, "accuracy_every_row") == pytest.approx((2 * 0.5 + 0.5 + 3 * yt) / 6)
    # released quirk: a WhereCountry accuracy of 0 leaves WhereCountry out of the published Overall
    items[0] = wb.WhereItem("c1", "wherecountry", parsed=True, correct=False)
    assert wb.overall_score(items, coordinates="acc@1km") == pytest.approx(2.5 / 4)
    assert wb.overall_score(items, "accuracy_every_row", coordinates="acc@1km") == pytest.approx(2.5 / 6)
    assert wb.overall_score(items) == pytest.approx((0.5 + 3 * yt) / 4)


def test_overall_uses_the_unrounded_wherecountry_accuracy() -> None:
    """p_C = 1/3 exactly (the released script writes correct / total unrounded), not 33.3333 %."""
    items = [wb.WhereItem(f"c{k}", "wherecountry", parsed=True, correct=k == 0) for k in range(3)]
    items.append(wb.WhereItem("t1", "text", "bilibili", path_score=0.0))
    assert wb.overall_score(items) == 3 * (1 / 3) / 4


def test_path_rules_hint_copy_and_implicit_parents() -> None:
    labels = wb.hierarchy_labels("Douguan Station, Guiyang, Guizhou, China", "street")
    hint = "The image is taken in China."
    copy = Prediction(address="China")
    score, _, given, copied = wb.item_path_score(copy, labels, "street", hint)
    assert (score, given, copied) == (0.0, "country", True)
    # a correct finer level credits the omitted coarser ones (released rule) ...
    implicit = Prediction(city="Guiyang", country="China")
    assert wb.item_path_score(implicit, labels, "street", hint)[0] == pytest.approx(2 / 3)
    # ... unless the answer names a different unit there
    contradicted = Prediction(city="Guiyang", admin1="Yunnan", country="China")
    assert wb.item_path_score(contradicted, labels, "street", hint)[0] == 0.0
    assert (
        wb.hint_level("It is one of: India, Burundi, Pakistan, Bangladesh", {"country": "Bangladesh"}) is None
    )
    listed = "The image is taken in one of the following place: A: Vietnam, B: Malaysia, C: Japan, D: Taiwan, China."  # noqa: E501
    assert wb.hint_level(listed, {"country": "China", "admin1": "Taiwan"}) is None  # a released row
    assert (
        wb.hint_level("this photo is likely taken from U.S.", {"country": "USA", "city": "Chicago"})
        == "country"
    )
    assert wb.hierarchy_labels("Wusheng County, Guang'an, Sichuan, China.", "admin2") == {
        "country": "China",
        "admin1": "Sichuan",
        "city": "Guang'an",
        "admin2": "Wusheng County",
    }


def test_eval_summary_has_the_wherebench_block(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = {
        "BV1u94y1L74z": {"city": "Liuzhou", "country": "China"},  # implicit province: 1
        "BV1tz4y1x7aj": {"city": "Kunming", "country": "China"},  # wrong city, province implied? no: 0
        "BV1Em4y137pm": {"country": "Bangladesh"},  # 1
        "BV1Mo4y1F7V4": {"lat": 23.70, "lon": 113.07},  # d = 0: not counted
        "BV1q2oHYgEwp": {"lat": 33.625, "lon": 119.11},  # 0.556 km
        "013-seg6": {"country": "Malta"},  # 1/3
        "003-seg2": {"status": "parse_failed"},
        "011-geopeter-seg2": {"lat": 52.3771, "lon": 4.9082},  # ~0.68 km east
        "023-geodetect-seg2": {"status": "input_error"},  # what the runner records without an image
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(release / "wherestreet" / "all.csv"),
            "--images",
            str(release / "imgs"),
            "--out",
            str(run_dir),
            "--agent-fn",
            "eval_fake_agent:planned",
        ],
    )
    assert result.exit_code == 0, result.output
    judgments = [
        {
            "sample_id": "BV1u94y1L74z",
            "judge": "clues",
            "ok": True,
            "result": {"used": [True, False, False, True]},
        },
        {"sample_id": "BV1Em4y137pm", "judge": "clues", "ok": False, "result": {"used": [False]}},
    ]
    (run_dir / "judgments.jsonl").write_text("".join(json.dumps(j) + "\n" for j in judgments))
    assert CliRunner().invoke(app, ["report", str(run_dir)]).exit_code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["protocol"]["name"] == "wherebench" and summary["units"]["accuracy"] == "percent"
    street = summary["wherebench"]["wherestreet"]
    assert street["bilibili"]["path_score"] == pytest.approx(100 * 2 / 3, abs=1e-3)  # (1 + 0 + 1) / 3
    assert street["youtube"]["path_score"] == pytest.approx(100 / 3, abs=1e-3)
    assert street["bilibili"]["acc@1km"] == 50.0  # 0 km excluded, 0.556 km in
    assert street["youtube"]["acc@1km"] == pytest.approx(
        100 / 3, abs=1e-3
    )  # 0.68 in; failed and missing image
    assert street["bilibili"]["thinking_text"]["thinking"] == pytest.approx(25.0)  # (2/4 + 0) / 2
    assert street["bilibili"]["thinking_text"]["thinking_shapley"] == pytest.approx(100 * (0.833 + 0) / 2)
    # Overall, Eq. 2: (3·2/3 + 1·1/3 + 2·1/2 + 3·1/3) / 9 = (2 + 1/3 + 1 + 1) / 9
    assert summary["wherebench"]["overall_eq2"] == pytest.approx(100 * (13 / 3) / 9, abs=1e-3)
    # released: mean answer scores; coordinates exp(−(d/0.1)^1.3): 0 km scores 1, 0.556 km
    # exp(−5.56^1.3) ≈ 9e-5, 0.68 km ≈ 5e-6; failed and missing 0
    near = math.exp(-((6371 * math.radians(0.005) / 0.1) ** 1.3))
    assert summary["wherebench"]["overall"] == pytest.approx(
        100 * (1 + 0 + 1 + 1 + near + 1 / 3) / 9, abs=1e-3
    )
    rows = {r["sample_id"]: r for r in csv.DictReader((run_dir / "per_sample.csv").open(encoding="utf-8"))}
    assert rows["BV1u94y1L74z"]["path_score"] == "1.0" and rows["013-seg6"]["path_score"] == str(1 / 3)
    assert rows["023-geodetect-seg2"]["status"] == "input_error"
    # the run's own records score the same under `geosleuth score`
    rescored = score_file(
        run_dir / "trajectories.jsonl",
        get_protocol("wherebench"),
        truth_path=release / "wherestreet" / "all.csv",
    ).score.metrics
    assert rescored["path_score_bilibili"] == pytest.approx(street["bilibili"]["path_score"], abs=1e-3)
    assert rescored["acc@1km_youtube"] == pytest.approx(street["youtube"]["acc@1km"], abs=1e-3)
    assert rescored["overall"] == pytest.approx(summary["wherebench"]["overall"], abs=1e-3)
    markdown = (run_dir / "summary.md").read_text()
    assert "## WhereBench (%)" in markdown and "| bilibili | 3 | 66.67 | 2 |" in markdown
    page = (run_dir / "html" / "index.html").read_text(encoding="utf-8")
    assert '<h2 id="wherebench">WhereBench (%)</h2>' in page
    assert "<tr><td>bilibili</td><td>3</td><td>66.67</td><td>2</td>" in page
    assert f"Overall (as released): {summary['wherebench']['overall']:.2f}" in page


def test_old_fraction_summaries_are_converted_once() -> None:
    old = {
        "metrics": {"acc@25km": {"value": 0.5, "ci95": [0.25, 0.75], "n": 4}, "median_km": 12.0},
        "breakdowns": {"continent": {"Europe": {"n": 2, "acc@25km": 1.0, "median_km": 3.0}}},
        "judges": {"levels": {"n": 2, "country_acc_rule": 0.5}},
    }
    new = percent_summary(old)
    assert new["metrics"]["acc@25km"] == {"value": 50.0, "ci95": [25.0, 75.0], "n": 4}
    assert (
        new["metrics"]["median_km"] == 12.0 and new["breakdowns"]["continent"]["Europe"]["acc@25km"] == 100.0
    )
    assert new["judges"]["levels"]["country_acc_rule"] == 50.0
    assert percent_summary(new) == new


def test_wherecountry_numbers_and_choice_key(release: Path, tmp_path: Path) -> None:
    preds = tmp_path / "p.jsonl"
    rows = [
        {"id": "OC7wNOoNM79aK0JfB5-L5Q", "choices": ["Spain", "Portugal", "France", "Morocco"],
         "response": "<answer>2</answer>"},
        {"id": "fRlOCIlcGeL75dzrP_OjMg", "choices": ["Hungary", "Romania", "Bulgaria", "Serbia"],
         "response": '{"choice": "D", "country": "Hungary"}'},
    ]  # fmt: skip
    preds.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = score_file(
        preds, get_protocol("wherebench"), truth_path=release / "wherecountry" / "wherecountry_500.csv"
    )
    assert result.score.metrics["acc_wherecountry_as_published"] == 100.0


@pytest.mark.parametrize(
    ("response", "correct"),
    [
        ("<think>Not 1: the plates say 3.</think><answer>2 (not 3)</answer>", True),  # released: 2
        ("<think>The signs look like 2.</think><answer>Spain, so 1</answer>", False),  # released: 1
        ("<think>Maybe 4, maybe 2.</think> I pick the second.", False),  # unclosed: first digit, 4
    ],
)
def test_wherecountry_reads_replies_with_the_released_regex(
    release: Path, tmp_path: Path, response: str, correct: bool
) -> None:
    preds = tmp_path / "p.jsonl"
    row = {
        "id": "OC7wNOoNM79aK0JfB5-L5Q",
        "choices": ["Spain", "Portugal", "France", "Morocco"],
        "response": response,
    }
    preds.write_text(json.dumps(row) + "\n")
    result = score_file(
        preds, get_protocol("wherebench"), truth_path=release / "wherecountry" / "wherecountry_500.csv"
    )
    assert result.score.metrics["acc_wherecountry_as_published"] == (100.0 if correct else 0.0)


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=300), st.text(max_size=120))
def test_model_text_never_breaks_the_rules(answer: str, hint: str) -> None:
    """Any answer and hint text: scores stay in [0, 1], coordinates are numbers or None."""
    labels = wb.hierarchy_labels("Douguan Station, Guiyang, Guizhou, China", "street")
    score, hits, given, _ = wb.item_path_score(Prediction(address=answer), labels, "street", hint)
    assert 0.0 <= score <= 1.0 and set(hits) == set(labels)
    assert given is None or given in labels
    found = wb.released_coordinates(wb.answer_block(answer))
    assert found is None or all(math.isfinite(x) for x in found)
    if any(part.strip(" .;") for part in answer.split(",")):
        assert "city" in wb.hierarchy_labels(answer, "city")
    else:
        with pytest.raises(ValueError, match="empty answer"):
            wb.hierarchy_labels(answer, "city")


def test_wherecountry_eval_and_rescoring_use_the_runs_option_order(
    release: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = release / "wherecountry" / "wherecountry_500.csv"
    shuffled = {s.id: s for s in load_dataset(table, images=release / "imgs", seed=7).samples}
    right = {i: "ABCD"[s.choices.index(s.labels["country"])] for i, s in shuffled.items()}
    vatican, portugal, serbia, swazi = list(shuffled)
    wrong = next(letter for letter in "ABCD" if letter != right[portugal])
    plan = {
        vatican: {"choice": right[vatican]},
        portugal: {"choice": wrong},
        serbia: {"status": "parse_failed"},
        swazi: {"choice": right[swazi]},
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    run_dir = tmp_path / "wc-run"
    args = ["eval", str(table), "--images", str(release / "imgs"), "--seed", "7", "--out", str(run_dir)]
    result = CliRunner().invoke(app, [*args, "--agent-fn", "eval_fake_agent:planned"])
    assert result.exit_code == 0, result.output
    country = json.loads((run_dir / "summary.json").read_text())["wherebench"]["wherecountry"]
    # 2 right of 3 answered; 2 of 4 rows
    assert country["accuracy_as_published"] == pytest.approx(100 * 2 / 3, abs=1e-3)
    assert country["accuracy_every_row"] == 50.0 and country["unparsed_ids"] == [serbia]
    rescored = score_file(run_dir / "trajectories.jsonl", get_protocol("wherebench"), truth_path=table)
    assert rescored.score.metrics["acc_wherecountry_as_published"] == pytest.approx(100 * 2 / 3, abs=1e-3)


def test_judge_asks_the_released_questions_of_a_local_server(release: Path, tmp_path: Path) -> None:
    """``score --judge``: every WhereStreet row gets the released prompts (predicted, ground truth,
    raw answer_type and hint filled in), the replies are read as released, rule scores stay offline."""
    from geosleuth.eval.run.config import JudgeSettings
    from geosleuth.eval.wherebench.judge import WhereBenchJudge
    from geosleuth.testing.fake_openai import FakeOpenAIServer, reply

    def answer(request: dict) -> object:
        prompt = request["messages"][0]["content"]
        if prompt.startswith("You are a strict geolocation evaluator"):
            if '"Liuzhou, Guangxi, China"' in prompt.split("Ground Truth Location:")[0]:
                return reply("<answer>0.5</answer>")  # the judge may disagree with the rule (1.0)
            if "Valletta" in prompt.split("Ground Truth Location:")[0]:
                return reply("Sure! <answer> 1.7 </answer>")  # clamped to 1
            return reply("no tag here")  # unreadable: 0, as released
        if prompt.startswith("Convert the following location"):
            return reply("<answer>52.3771, 4.8982</answer>")  # "I cannot tell." converted
        if 'Key Clue: "Many mini electric cars point to Liuzhou."' in prompt:
            return reply("<answer>YES</answer>\n<explanation>It cites the mini EVs.</explanation>")
        return reply("<answer>No</answer>")

    with FakeOpenAIServer(answer, model="judge") as server:
        judge = WhereBenchJudge(JudgeSettings(model="judge", base_url=server.base_url))
        preds = tmp_path / "pooled.jsonl"
        preds.write_text("".join(json.dumps(r) + "\n" for r in POOLED))
        try:
            result = score_file(preds, get_protocol("wherebench"), truth_path=release, judge=judge)
        finally:
            judge.close()
        prompts = [r.messages[0]["content"] for r in server.chat_requests]
    rows = {r["id"]: r for r in result.rows}
    assert rows["BV1u94y1L74z"]["path_score"] == 0.5 and rows["BV1u94y1L74z"]["path_score_rule"] == 1.0
    assert rows["013-seg6"]["path_score"] == 1.0
    assert rows["BV1tz4y1x7aj"]["path_score"] == 0.0 and rows["BV1Em4y137pm"]["path_score"] == 0.0
    assert rows["011-geopeter-seg2"]["distance_km"] == pytest.approx(0.0, abs=1e-9)
    assert rows["BV1u94y1L74z"]["thinking_result"] == [0, 0, 0, 1]
    liuzhou = next(p for p in prompts if p.startswith("You are a strict") and "Liuzhou, Guangxi" in p)
    assert '- Granularity to Judge (answer_type): "city"' in liuzhou
    assert '- Hint (reference only; do not copy): "The image is taken in China"' in liuzhou
    assert "without adding any level at or below city" in liuzhou  # every {answer_type} filled in
    clue = next(p for p in prompts if "Key Clue" in p)
    assert 'Reasoning Process: "<think>mini EVs</think><answer>Liuzhou, Guangxi, China</answer>"' in clue
    # 4 text rows judged, 1 conversion, 4 + 4 + 1 + 1 + 2 + 2 + 1 + 1 clue questions
    assert len(prompts) == 4 + 1 + 16
    m = result.score.metrics
    assert m["path_score_bilibili"] == pytest.approx(100 * 0.5 / 3, abs=1e-3)


def test_judge_failures_fail_only_their_rows(release: Path, tmp_path: Path) -> None:
    from geosleuth.eval.run.config import JudgeSettings
    from geosleuth.eval.wherebench.judge import WhereBenchJudge, read_clue_verdict, read_path_score
    from geosleuth.testing.fake_openai import FakeOpenAIServer, error

    with FakeOpenAIServer([], model="judge", default=error(400, "bad request")) as server:
        judge = WhereBenchJudge(JudgeSettings(model="judge", base_url=server.base_url, max_retries=0))
        preds = tmp_path / "p.jsonl"
        preds.write_text("".join(json.dumps(r) + "\n" for r in POOLED))
        try:
            result = score_file(preds, get_protocol("wherebench"), truth_path=release, judge=judge)
        finally:
            judge.close()
    assert result.score.n == 13
    assert any("judge request failed" in w for w in result.score.warnings)
    assert read_path_score("<answer>0.333</answer>") == 0.333 and read_path_score("0.9") == 0.0
    assert read_clue_verdict("<ANSWER> yes </ANSWER>") and not read_clue_verdict(
        "<answer>Yes, mostly</answer>"
    )


def test_judge_flag_is_for_wherebench_only(tmp_path: Path) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "a", "response": "x", "lat": 1.0, "lon": 2.0}) + "\n")
    out = CliRunner().invoke(app, ["score", str(preds), "--protocol", "twm", "--judge", "m"])
    assert out.exit_code == 2 and "--judge applies to --protocol wherebench" in out.output
