"""The standard benchmarks' files as distributed, built here from their documented column orders.

Sources of each layout (read, not vendored): OSV-5M ``data/data.py`` ``Baseline`` (IM2GPS
``info.json``: file name -> list, [-4] "latitude: X", [-3] "longitude: Y"; YFCC ``info.txt``:
tab-separated, photo id x[1], longitude x[12], latitude x[13]); GeoEstimation
``meta/im2gps3k_places365.csv`` (``IMG_ID,AUTHOR,LAT,LON,S3_Label,S16_Label,S365_Label,
Prob_indoor,Prob_natural,Prob_urban``; the 2018 file named the columns ``LON,LAT`` over latitude,
longitude values); G3 ``utils/utils.py`` (MP16-Pro levels ``neighbourhood, city, county, state,
region, country, continent``; ``IMG_ID`` with ``/`` read as ``_``); the OSV-5M hub ``test.csv``
(``unique_*`` columns, ``images/test/NN.zip``); GREval-Bench's README (``sample_id, image_path,
gt_cot, gt_lat, gt_lon`` in ``bench_data/GREval-Bench.json`` with ``imgs/``); GeoVista's
``inference_agent_tool_mode.py`` (hub rows with ``metadata`` {uid, location {lat, lng},
multi_level_loc_dict} and ``raw_image_path``); EarthWhere's repository (``wherecountry/`` and
``wherestreet/`` with their tables, ``gt_key_clues_weight.json`` and ``imgs/``).
"""

from __future__ import annotations

import csv
import json
import tempfile
import zipfile
from pathlib import Path

import pytest
from eval_data import make_image
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.datasets.layouts import MAX_LINE_CHARS, info_json_rows, info_txt_rows
from geosleuth.eval.datasets.loading import DatasetError, load_dataset

PLACES365 = [
    "IMG_ID",
    "AUTHOR",
    "LAT",
    "LON",
    "S3_Label",
    "S16_Label",
    "S365_Label",
    "Prob_indoor",
    "Prob_natural",
    "Prob_urban",
]
BERMUDA = ["1000269685_e60e9cdfb4_1125_78841376@N00.jpg", "78841376@N00", "32.325436", "-64.764404"]
SCENES = ["2", "12", "353", "0.27", "0.05", "0.68"]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def validate(path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["datasets", "validate", str(path)])
    return result.exit_code, result.output


# ----------------------------------------------------------------------------- IM2GPS / YFCC


def test_im2gps3k_places365_is_named(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / BERMUDA[0], 1)
    write_csv(tmp_path / "im2gps3k_places365.csv", PLACES365, [BERMUDA + SCENES])
    ds = load_dataset(tmp_path)
    (sample,) = ds.samples
    assert ds.format == "im2gps3k" and ds.layout == "IM2GPS places365 (im2gps3k_places365.csv)"
    assert (sample.lat, sample.lon) == (32.325436, -64.764404)  # Bermuda: 32.3° N, 64.8° W
    code, out = validate(tmp_path)
    assert code == 0 and "layout: IM2GPS places365 (im2gps3k_places365.csv)" in out


def test_places365_2018_header_is_read_by_position(tmp_path: Path) -> None:
    """The 2018 file says LON, LAT over latitude, longitude values (Bermuda is 32.3° N, 64.8° W)."""
    header = ["IMG_ID", "AUTHOR", "LON", "LAT", *PLACES365[4:]]
    make_image(tmp_path / "images" / BERMUDA[0], 1)
    table = write_csv(tmp_path / "im2gps3k_places365.csv", header, [BERMUDA + SCENES])
    ds = load_dataset(table)
    (sample,) = ds.samples
    assert (sample.lat, sample.lon) == (32.325436, -64.764404)
    assert "LON/LAT names swapped" in (ds.layout or "")


def test_im2gps_info_json_of_the_osv5m_baseline(tmp_path: Path) -> None:
    """Before: accepted with no error and 0 samples. [-4] latitude, [-3] longitude."""
    make_image(tmp_path / "images" / "a.jpg", 1)
    make_image(tmp_path / "images" / "b.jpg", 2)
    info = {
        "a.jpg": ["user", "title", "latitude: 48.8566", "longitude: 2.3522", "x", "y"],
        "b.jpg": ["latitude: -33.8688", "longitude: 151.2093", "x", "y"],
        "c.jpg": [],
    }
    (tmp_path / "info.json").write_text(json.dumps(info))
    ds = load_dataset(tmp_path)
    assert ds.layout == "IM2GPS info.json (OSV-5M baseline)" and ds.format == "im2gps3k"
    assert [(s.id, s.lat, s.lon) for s in ds.samples] == [("a", 48.8566, 2.3522), ("b", -33.8688, 151.2093)]
    assert all(Path(s.image or "").is_file() for s in ds.samples)
    assert len(ds.problems) == 1 and "c.jpg" in str(ds.problems[0])  # the released loader skips it silently
    code, out = validate(tmp_path)
    assert code == 1 and "layout: IM2GPS info.json" in out and "c.jpg" in out


def test_info_json_with_no_usable_entry_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "info.json").write_text(json.dumps({"a.jpg": [], "b.jpg": ["lat 1", "lon 2", "x", "y"]}))
    with pytest.raises(DatasetError, match="0 samples") as err:
        load_dataset(tmp_path)
    assert "info.json" in str(err.value) and "latitude: X" in str(err.value)


def test_yfcc_info_txt_of_the_osv5m_baseline(tmp_path: Path) -> None:
    """Before: "expected exactly one .csv/.tsv/.jsonl/.json table". x[1] id, x[12] lon, x[13] lat."""
    fields = [str(i) for i in range(24)]
    fields[1], fields[12], fields[13] = "8212131", "-73.985656", "40.748433"
    short = ["0", "99", "x"]
    (tmp_path / "info.txt").write_text("\t".join(fields) + "\n" + "\t".join(short) + "\n")
    make_image(tmp_path / "images" / "8212131.jpg", 3)
    ds = load_dataset(tmp_path)
    (sample,) = ds.samples
    assert ds.layout == "YFCC info.txt (OSV-5M baseline)" and ds.format == "yfcc4k"
    assert (sample.id, sample.lat, sample.lon) == ("8212131", 40.748433, -73.985656)
    assert Path(sample.image or "").is_file()
    assert "line 2 has 3 tab-separated fields" in str(ds.problems[0])


def test_yfcc4k_places365(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "77_a.jpg", 4)
    write_csv(tmp_path / "yfcc4k_places365.csv", PLACES365, [["77_a.jpg", "u", "35.0", "139.0", *SCENES]])
    ds = load_dataset(tmp_path)
    assert ds.format == "yfcc4k" and ds.layout == "YFCC places365 (yfcc4k_places365.csv)"
    assert [(s.id, s.lat, s.lon) for s in ds.samples] == [("77_a", 35.0, 139.0)]


# ----------------------------------------------------------------------------- OSV-5M hub

HUB_COLUMNS = [
    "id",
    "latitude",
    "longitude",
    "thumb_original_url",
    "country",
    "sequence",
    "captured_at",
    "lon_bin",
    "lat_bin",
    "cell",
    "region",
    "sub-region",
    "city",
    "land_cover",
    "climate",
    "unique_country",
    "unique_region",
    "unique_sub-region",
    "unique_city",
]


def _hub_row(sample_id: str) -> list[str]:
    return [
        sample_id,
        "45.1885",
        "5.7245",
        "https://x",
        "FR",
        "s1",
        "0",
        "10",
        "20",
        "(1, 2)",
        "Auvergne-Rhône-Alpes",
        "Isère",
        "Grenoble",
        "3",
        "8",
        "FR",  # the released unique_* join names from the left: city_sub-region_region_country
        "Auvergne-Rhône-Alpes_FR",
        "Isère_Auvergne-Rhône-Alpes_FR",
        "Grenoble_Isère_Auvergne-Rhône-Alpes_FR",
    ]


def test_osv5m_hub_test_csv_with_image_folders(tmp_path: Path) -> None:
    write_csv(tmp_path / "test.csv", HUB_COLUMNS, [_hub_row("101")])
    make_image(tmp_path / "images" / "test" / "00" / "101.jpg", 5)
    ds = load_dataset(tmp_path)
    (sample,) = ds.samples
    assert ds.format == "osv5m" and ds.layout.startswith("OSV-5M hub")  # type: ignore[union-attr]
    assert sample.labels == {
        "country": "FR",
        "admin1": "Auvergne-Rhône-Alpes",
        "admin2": "Isère",
        "city": "Grenoble",
    }
    assert Path(sample.image or "").is_file()


def test_osv5m_hub_unique_columns_alone_give_the_labels(tmp_path: Path) -> None:
    keep = [i for i, c in enumerate(HUB_COLUMNS) if c not in ("country", "region", "sub-region", "city")]
    header = [HUB_COLUMNS[i] for i in keep]
    row = [_hub_row("101")[i] for i in keep]
    table = write_csv(tmp_path / "test.csv", header, [row])
    make_image(tmp_path / "images" / "test" / "101.jpg", 5)
    (sample,) = load_dataset(table).samples
    assert sample.labels == {
        "country": "FR",
        "admin1": "Auvergne-Rhône-Alpes",
        "admin2": "Isère",
        "city": "Grenoble",
    }


def test_osv5m_unique_values_split_from_the_left_in_the_released_order(tmp_path: Path) -> None:
    """``unique_city`` is ``city_sub-region_region_country``; ``NaN`` marks a level the release lacks."""
    header = [
        "id",
        "latitude",
        "longitude",
        "unique_country",
        "unique_region",
        "unique_sub-region",
        "unique_city",
    ]
    row = [
        "7",
        "-43.95",
        "-176.56",
        "NZ",
        "Chatham Islands_NZ",
        "NaN_Chatham Islands_NZ",
        "Waitangi_NaN_Chatham Islands_NZ",
    ]
    table = write_csv(tmp_path / "test.csv", header, [row])
    make_image(tmp_path / "images" / "test" / "7.jpg", 5)
    code, out = validate(table)
    assert code == 0, out
    (sample,) = load_dataset(table).samples
    assert sample.labels == {"country": "NZ", "admin1": "Chatham Islands", "city": "Waitangi"}


def test_osv5m_row_with_a_field_missing_is_a_bad_row_not_shifted_labels(tmp_path: Path) -> None:
    short = _hub_row("202")
    del short[4]  # "FR" gone: every later value would move one column to the left
    table = write_csv(
        tmp_path / "test.csv", HUB_COLUMNS, [_hub_row("101"), short, [*_hub_row("303"), "extra"]]
    )
    for sid in ("101", "202", "303"):
        make_image(tmp_path / "images" / "test" / f"{sid}.jpg", 5)
    code, out = validate(table)
    assert code == 1
    assert f"row 2: line 3 has {len(HUB_COLUMNS) - 1} fields where the header has {len(HUB_COLUMNS)}" in out
    assert f"row 3: line 4 has {len(HUB_COLUMNS) + 1} fields where the header has {len(HUB_COLUMNS)}" in out
    assert "1 valid sample(s), 2 problem(s)" in out
    assert [s.id for s in load_dataset(table).samples] == ["101"]


def test_osv5m_hub_images_in_the_released_zip_parts(tmp_path: Path) -> None:
    write_csv(tmp_path / "test.csv", HUB_COLUMNS, [_hub_row("101"), _hub_row("202")])
    make_image(tmp_path / "src" / "101.jpg", 6)
    parts = tmp_path / "images" / "test"
    parts.mkdir(parents=True)
    with zipfile.ZipFile(parts / "00.zip", "w") as archive:
        archive.write(tmp_path / "src" / "101.jpg", "00/101.jpg")
        archive.write(tmp_path / "src" / "101.jpg", "../202.jpg")  # would leave the folder: never extracted
    ds = load_dataset(tmp_path)
    assert [s.id for s in ds.samples] == ["101", "202"]
    first = Path(ds.samples[0].image or "")
    assert first == (parts / "00" / "101.jpg").absolute() and first.read_bytes()[:2] == b"\xff\xd8"
    assert [m.sample_id for m in ds.missing_images] == ["202"]
    assert not (tmp_path / "images" / "202.jpg").exists()


@pytest.mark.parametrize("plant", ["part", "final", "folder"])
def test_osv5m_zip_extraction_never_writes_through_a_planted_link(tmp_path: Path, plant: str) -> None:
    """Issue 41: a ``<name>.part`` link, a link at the name or a linked folder on the member's
    path must not make ``datasets validate`` write the member outside the dataset."""
    data = tmp_path / "data"
    write_csv(data / "test.csv", HUB_COLUMNS, [_hub_row("101")])
    make_image(tmp_path / "src" / "101.jpg", 6)
    parts = data / "images" / "test"
    parts.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "101.jpg").write_bytes(b"precious")
    (victim / "101.jpg.part").write_bytes(b"precious")
    with zipfile.ZipFile(parts / "00.zip", "w") as archive:
        archive.write(tmp_path / "src" / "101.jpg", "00/101.jpg")
    if plant == "folder":
        (parts / "00").symlink_to(victim, target_is_directory=True)
    else:
        (parts / "00").mkdir()
        name = "101.jpg.part" if plant == "part" else "101.jpg"
        (parts / "00" / name).symlink_to(victim / name)
    code, out = validate(data)
    assert (victim / "101.jpg").read_bytes() == b"precious"
    assert (victim / "101.jpg.part").read_bytes() == b"precious"
    assert sorted(p.name for p in victim.iterdir()) == ["101.jpg", "101.jpg.part"]
    if plant != "folder":  # through the linked folder: refused, the victim's file stays as it was
        extracted = parts / "00" / "101.jpg"
        assert code == 0 and not extracted.is_symlink() and extracted.read_bytes()[:2] == b"\xff\xd8"


# ----------------------------------------------------------------------------- MP16-Pro, GREval, GeoVista

MP16 = [
    "IMG_ID",
    "AUTHOR",
    "LAT",
    "LON",
    "S3_Label",
    "S16_Label",
    "S365_Label",
    "Prob_indoor",
    "Prob_natural",
    "Prob_urban",
    "neighbourhood",
    "city",
    "county",
    "state",
    "region",
    "country",
    "continent",
]


def test_mp16_pro(tmp_path: Path) -> None:
    row = [
        "e4/3a/123.jpg",
        "u",
        "47.3769",
        "8.5417",
        *SCENES,
        "Altstadt",
        "Zurich",
        "Bezirk Zürich",
        "Zurich",
    ]
    write_csv(tmp_path / "MP16_Pro_places365.csv", MP16, [[*row, "", "Switzerland", "Europe"]])
    make_image(tmp_path / "images" / "e4_3a_123.jpg", 7)  # G3 names the file with "/" read as "_"
    ds = load_dataset(tmp_path)
    (sample,) = ds.samples
    assert ds.format == "mp16pro" and ds.layout == "MP16-Pro (MP16_Pro_places365.csv)"
    assert sample.id == "e4_3a_123" and Path(sample.image or "").is_file()
    assert sample.labels == {
        "country": "Switzerland",
        "admin1": "Zurich",
        "admin2": "Bezirk Zürich",
        "city": "Zurich",
    }
    assert sample.metadata["neighbourhood"] == "Altstadt" and sample.metadata["continent"] == "Europe"


def test_greval_bench_json(tmp_path: Path) -> None:
    bench = tmp_path / "bench_data"
    make_image(bench / "imgs" / "s1.jpg", 8)
    make_image(bench / "imgs" / "s2.jpg", 9)
    rows = [
        {
            "sample_id": "s1",
            "image_path": "imgs/s1.jpg",
            "gt_cot": "Signs in French.",
            "gt_lat": 48.85,
            "gt_lon": 2.35,
        },
        {"sample_id": "s2", "image_path": "s2.jpg", "gt_cot": "…", "gt_lat": -33.87, "gt_lon": 151.21},
    ]
    (bench / "GREval-Bench.json").write_text(json.dumps(rows))
    ds = load_dataset(tmp_path)
    assert ds.format == "greval" and ds.layout == "GREval-Bench (bench_data/GREval-Bench.json)"
    assert [(s.id, s.lat, s.lon) for s in ds.samples] == [("s1", 48.85, 2.35), ("s2", -33.87, 151.21)]
    assert all(Path(s.image or "").is_file() for s in ds.samples)
    assert ds.samples[0].metadata["gt_cot"] == "Signs in French."


def _geovista_rows() -> list[dict[str, object]]:
    """GeoVistaBench's hub card: id, raw_image_path (raw_image/<uid>/…), preview, metadata, data_type."""
    meta = {
        "uid": "gv-1",
        "location": {"lat": 31.2304, "lng": 121.4737},
        "multi_level_loc_dict": {"country": "China", "province_or_state": "Shanghai", "city": "Shanghai"},
    }
    return [
        {
            "id": "gv-1",
            "raw_image_path": "raw_image/gv-1/panorama-gv-1.jpg",
            "preview": {"bytes": b"", "path": "preview_image/gv-1/panorama-gv-1.jpg"},
            "metadata": json.dumps(meta),
            "data_type": "panorama",
        }
    ]


def test_geovista_bench_as_a_hub_snapshot(tmp_path: Path) -> None:
    """data/test/data-00000-of-00001.parquet beside dataset_info.json, images under raw_image/<uid>/."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    snapshot = tmp_path / "GeoVistaBench"
    (snapshot / "data" / "test").mkdir(parents=True)
    (snapshot / "dataset_info.json").write_text("{}")
    pq.write_table(
        pa.Table.from_pylist(_geovista_rows()), snapshot / "data" / "test" / "data-00000-of-00001.parquet"
    )
    make_image(snapshot / "raw_image" / "gv-1" / "panorama-gv-1.jpg", 10)
    ds = load_dataset(snapshot)
    (sample,) = ds.samples
    assert ds.layout == "Hugging Face hub snapshot (split test: data/test/data-00000-of-00001.parquet)"
    assert sample.id == "gv-1" and (sample.lat, sample.lon) == (31.2304, 121.4737)
    assert sample.labels == {"country": "China", "admin1": "Shanghai", "city": "Shanghai"}
    assert sample.metadata == {"data_type": "panorama"} and Path(sample.image or "").is_file()
    with pytest.raises(DatasetError, match="splits test; choose one with --split"):
        load_dataset(snapshot, split="train")


def test_geobench_hub_snapshot_with_embedded_images(tmp_path: Path) -> None:
    """LibraTree/GeoBench: data/train-*.parquet with an embedded image and a metadata string."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    make_image(tmp_path / "src.jpg", 11)
    meta = json.loads(str(_geovista_rows()[0]["metadata"]))
    row = {
        "image": {"bytes": (tmp_path / "src.jpg").read_bytes(), "path": None},
        "metadata": json.dumps(meta),
    }
    snapshot = tmp_path / "GeoBench"
    (snapshot / "data").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([row]), snapshot / "data" / "train-00000-of-00001.parquet")
    ds = load_dataset(snapshot)
    (sample,) = ds.samples
    assert ds.layout == "Hugging Face hub snapshot (split train: data/train-00000-of-00001.parquet)"
    assert sample.id == "gv-1" and Path(sample.image or "").is_file()
    assert Path(sample.image or "").parent.parent == tmp_path / "GeoBench.images"  # beside the snapshot


def test_geovista_rows_as_jsonl(tmp_path: Path) -> None:
    (tmp_path / "geobench.jsonl").write_text(json.dumps({**_geovista_rows()[0], "preview": None}) + "\n")
    make_image(tmp_path / "raw_image" / "gv-1" / "panorama-gv-1.jpg", 10)
    (sample,) = load_dataset(tmp_path / "geobench.jsonl").samples
    assert sample.id == "gv-1" and Path(sample.image or "").is_file()


# ----------------------------------------------------------------------------- EarthWhere


def _earthwhere(root: Path) -> Path:
    country = root / "wherecountry"
    write_csv(
        country / "wherecountry_500.csv",
        ["nation", "panoID", "options", "answer-type"],
        [["Kenya", "pano1", "['Uganda', 'Tanzania', 'Ethiopia']", "country"]],
    )
    make_image(country / "imgs" / "pano1_panoramic.jpg", 11)
    street = root / "wherestreet"
    write_csv(
        street / "all.csv",
        ["BVID", "key_clues", "answer", "answer_type", "hint"],
        [["BV1x", '["tram"]', "Liuzhou, Guangxi, China", "city", "[]"]],
    )
    (street / "gt_key_clues_weight.json").write_text(json.dumps({"BV1x": [1.0]}))
    (street / "PROMPT.py").write_text("PROMPT = ''\n")
    make_image(street / "imgs" / "BV1x.jpg", 12)
    return root


def test_earthwhere_release_folder_loads_both_tasks(tmp_path: Path) -> None:
    ds = load_dataset(_earthwhere(tmp_path / "EarthWhere"))
    assert ds.layout == "EarthWhere (WhereCountry + WhereStreet)"
    assert sorted(s.id for s in ds.samples) == ["BV1x", "pano1"]
    assert not ds.problems and not ds.missing_images
    assert next(s for s in ds.samples if s.id == "BV1x").clue_weights == [1.0]


def test_earthwhere_wherestreet_folder_with_its_weights_file(tmp_path: Path) -> None:
    """Before: all.csv beside gt_key_clues_weight.json was "expected exactly one table"."""
    ds = load_dataset(_earthwhere(tmp_path / "EarthWhere") / "wherestreet")
    assert ds.format == "wherestreet" and ds.layout == "EarthWhere WhereStreet (all.csv)"
    assert [s.id for s in ds.samples] == ["BV1x"]


# ----------------------------------------------------------------------------- zero samples


def test_wrong_column_names_list_found_and_accepted(tmp_path: Path) -> None:
    table = write_csv(tmp_path / "t.csv", ["photo", "latitude_deg", "longitude_deg"], [["a.jpg", "1", "2"]])
    with pytest.raises(DatasetError) as err:
        load_dataset(table)
    message = str(err.value)
    assert "0 samples" in message and "photo, latitude_deg, longitude_deg" in message
    assert "lat, latitude, LAT" in message and "gt_lat" in message and "IMG_ID, LAT, LON" in message
    code, out = validate(table)
    assert code == 2 and "latitude_deg" in out  # a dataset that cannot be read: usage error, as before


def test_a_known_format_missing_its_columns_is_an_error(tmp_path: Path) -> None:
    table = write_csv(tmp_path / "t.csv", ["id", "lat", "lon"], [["a", "1", "2"]])
    with pytest.raises(DatasetError, match="read as osv5m, it yields 0 samples"):
        load_dataset(table, format="osv5m")


def test_bad_values_stay_listed_problems(tmp_path: Path) -> None:
    """Columns are right, values are not: each bad row is listed (no layout error)."""
    table = write_csv(tmp_path / "t.csv", ["IMG_ID", "LAT", "LON"], [["a.jpg", "north", "2"]])
    ds = load_dataset(table)
    assert ds.samples == [] and "latitude 'north' is not a number" in str(ds.problems[0])


def test_baseline_files_named_directly(tmp_path: Path) -> None:
    make_image(tmp_path / "images" / "a.jpg", 1)
    (tmp_path / "info.json").write_text(json.dumps({"a.jpg": ["latitude: 1.5", "longitude: 2.5", "x", "y"]}))
    assert [(s.lat, s.lon) for s in load_dataset(tmp_path / "info.json").samples] == [(1.5, 2.5)]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.-\tabc:", max_size=80), max_size=6))
def test_info_txt_lines_are_rows_or_named_errors(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "info.txt"
        path.write_text("\n".join(lines), encoding="utf-8")
        for row in info_txt_rows(path):
            assert "__error__" in row or set(row) == {"IMG_ID", "LAT", "LON"}


def test_info_txt_overlong_line_is_one_bad_row(tmp_path: Path) -> None:
    fields = [str(i) for i in range(14)]
    good = "\t".join(fields)
    (tmp_path / "info.txt").write_text("x" * (MAX_LINE_CHARS + 10) + "\n" + good + "\n")
    rows = list(info_txt_rows(tmp_path / "info.txt"))
    assert "longer than" in rows[0]["__error__"] and rows[1] == {"IMG_ID": "1.jpg", "LAT": "13", "LON": "12"}


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.lists(st.text(max_size=20), max_size=6), max_size=5))
def test_info_json_entries_are_rows_or_named_errors(data: dict[str, list[str]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "info.json"
        path.write_text(json.dumps(data), encoding="utf-8")
        rows = list(info_json_rows(path))
        assert len(rows) == len(data)
        assert all("__error__" in r or set(r) == {"IMG_ID", "LAT", "LON"} for r in rows)


def test_only_osv5m_looks_inside_zip_parts(tmp_path: Path) -> None:
    """Another dataset's image folder may hold unrelated archives: they are never opened or extracted."""
    make_image(tmp_path / "src" / "x.jpg", 1)
    (tmp_path / "images").mkdir()
    with zipfile.ZipFile(tmp_path / "images" / "00.zip", "w") as archive:
        archive.write(tmp_path / "src" / "x.jpg", "x.jpg")
    write_csv(tmp_path / "data.csv", ["id", "lat", "lon"], [["x", "1", "2"]])
    ds = load_dataset(tmp_path / "data.csv")
    assert [m.sample_id for m in ds.missing_images] == ["x"] and not (tmp_path / "images" / "x.jpg").exists()


def test_hub_split_in_several_shards_keeps_each_image(tmp_path: Path) -> None:
    """data/test-00000-of-00002 and -00001 beside train shards; rows without an id in both shards
    are index 0 there, yet each keeps its own embedded image."""
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    snapshot = tmp_path / "hub"
    (snapshot / "data").mkdir(parents=True)
    for shard, (uid, seed) in enumerate((("u0", 1), ("u1", 2))):
        make_image(tmp_path / f"{uid}.jpg", seed)
        meta = {"uid": uid, "location": {"lat": 10.0 + shard, "lng": 20.0}}
        row = {
            "image": {"bytes": (tmp_path / f"{uid}.jpg").read_bytes(), "path": None},
            "metadata": json.dumps(meta),
        }
        pq.write_table(pa.Table.from_pylist([row]), snapshot / "data" / f"test-0000{shard}-of-00002.parquet")
    pq.write_table(pa.Table.from_pylist([row]), snapshot / "data" / "train-00000-of-00001.parquet")
    ds = load_dataset(snapshot)
    assert ds.layout == "Hugging Face hub snapshot (split test: 2 parquet shards)"
    assert [(s.id, s.lat) for s in ds.samples] == [("u0", 10.0), ("u1", 11.0)]
    images = [Path(s.image or "").read_bytes() for s in ds.samples]
    assert images == [(tmp_path / "u0.jpg").read_bytes(), (tmp_path / "u1.jpg").read_bytes()]
    (train,) = load_dataset(snapshot, split="train").samples
    assert train.id == "u1" and Path(train.image or "").read_bytes() == (tmp_path / "u1.jpg").read_bytes()


def _geoguessr_map(folder: Path, images: list[dict] | None = None) -> Path:
    """ccmdi's GeoBench dataset folder as dataset.py writes it: metadata.json beside images/N.jpg."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = images or [
        {"image_path": "images/1.jpg", "country": "Japan", "lat": 35.68, "lng": 139.69},
        {"image_path": "images/2.jpg", "country": "Kenya", "lat": -1.29, "lng": 36.82},
    ]
    for i, entry in enumerate(entries):
        if str(entry.get("image_path", "")).endswith(".jpg"):
            make_image(folder / entry["image_path"], i)
    bounds = {"min": {"lat": -55.0, "lng": -170.0}, "max": {"lat": 78.0, "lng": 179.0}}
    (folder / "metadata.json").write_text(json.dumps({"bounds": bounds, "images": entries}, indent=2))
    return folder


def test_geoguessr_map_folder_of_ccmdi_geobench(tmp_path: Path) -> None:
    folder = _geoguessr_map(tmp_path / "acw")
    for source in (folder, folder / "metadata.json"):
        ds = load_dataset(source)
        assert "GeoBench GeoGuessr map" in str(ds.layout)
        first = ds.samples[0]
        assert (first.id, first.lat, first.lon, first.labels["country"]) == ("1", 35.68, 139.69, "Japan")
        assert Path(first.image or "") == folder / "images" / "1.jpg"
        assert first.metadata["map_bounds"] == [-55.0, -170.0, 78.0, 179.0]
        assert first.data_source == "geoguessr_map"


def test_geoguessr_map_with_bad_bounds_is_an_error(tmp_path: Path) -> None:
    folder = _geoguessr_map(tmp_path / "bad")
    data = json.loads((folder / "metadata.json").read_text())
    data["bounds"] = {"min": {"lat": 0}, "max": {"lat": 1, "lng": 2}}
    (folder / "metadata.json").write_text(json.dumps(data))
    with pytest.raises(DatasetError, match="bounds.min is not an object with lat and lng"):
        load_dataset(folder)
