"""OCR reads rendered signs (Latin, CJK); clue extractors turn text into country hints; EXIF GPS."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

import pytest
from PIL import Image, ImageDraw, ImageFont
from PIL.TiffImagePlugin import IFDRational

from geosleuth.tools import build_registry
from geosleuth.tools.base import ToolContext
from geosleuth.tools.clues import country_votes, detect_language, extract_clues, script_profile
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.exif import read_exif

LATIN_FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
CJK_FONT_GLOBS = (
    "/usr/share/fonts/**/wqy-*.tt[cf]",
    "/usr/share/fonts/**/NotoSansCJK*.tt[cf]",
    "/usr/share/fonts/**/NotoSansCJK*.otf",
    "/usr/share/fonts/**/*[Cc][Jj][Kk]*.tt[cf]",
    "/usr/share/fonts/**/droid*fallback*.ttf",
)


def _font(path: str | None, size: int) -> ImageFont.FreeTypeFont:
    if path and Path(path).is_file():
        return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)


def _cjk_font() -> str | None:
    for pattern in CJK_FONT_GLOBS:
        found = sorted(glob.glob(pattern, recursive=True))
        if found:
            return found[0]
    return None


def _sign(lines: list[str], font: ImageFont.FreeTypeFont, size: tuple[int, int] = (900, 360)) -> Image.Image:
    """A street-sign-like image: dark text on a light panel over a grey background."""
    im = Image.new("RGB", size, (120, 130, 125))
    draw = ImageDraw.Draw(im)
    draw.rectangle((30, 30, size[0] - 30, size[1] - 30), fill=(245, 245, 235))
    for i, line in enumerate(lines):
        draw.text((60, 60 + i * 90), line, fill=(20, 20, 90), font=font)
    return im


@pytest.fixture(scope="module")
def registry():  # type: ignore[no-untyped-def]
    return build_registry(ToolSettings(cache={"backend": "none"}), names=["ocr", "exif_gps"])


async def test_ocr_reads_a_latin_sign(registry) -> None:  # type: ignore[no-untyped-def]
    im = _sign(["Bahnhofstrasse 12", "Tel +41 44 123 45 67"], _font(LATIN_FONT, 56))
    result = await registry.call("ocr", {}, ToolContext(image=im))
    assert result.ok, result.error
    text = " ".join(line["text"] for line in result.data["lines"]).replace(" ", "").lower()
    assert "bahnhofstrasse12" in text
    assert "CH" in result.data["country_hints"]
    assert all(line["script"] in {"Latin", None} for line in result.data["lines"])
    first = result.data["lines"][0]["box"]
    assert 30 <= first[0] < 200 and 30 <= first[1] < 200  # boxes in image pixels


async def test_ocr_region_and_scaled_boxes(registry) -> None:  # type: ignore[no-untyped-def]
    im = _sign(["ZURICH", "GENEVE"], _font(LATIN_FONT, 64))
    ctx = ToolContext(image=im, model_scale=0.5)
    result = await registry.call(
        "ocr", {"region": [0, 0, 450, 72]}, ctx
    )  # first line only; model frame 450x180
    assert result.ok, result.error
    texts = [line["text"].upper() for line in result.data["lines"]]
    assert any("ZURICH" in t for t in texts) and not any("GENEVE" in t for t in texts)
    box = result.data["lines"][0]["box"]
    assert box[2] <= 450 and box[3] <= 72  # reported in the model's frame


async def test_ocr_reads_a_cjk_sign(registry) -> None:  # type: ignore[no-untyped-def]
    font = _cjk_font()
    if font is None:
        pytest.skip("no CJK font on this machine (apt-get install fonts-wqy-microhei)")
    im = _sign(["北京大学", "東京駅"], _font(font, 64))
    result = await registry.call("ocr", {}, ToolContext(image=im))
    assert result.ok, result.error
    text = "".join(line["text"] for line in result.data["lines"])
    assert "北京大学" in text
    assert "Han" in result.data["scripts"]


def test_clues_phone_domain_currency_pattern() -> None:
    clues = extract_clues("Call +41 44 668 18 00, www.sbb.ch — Preis CHF 4.50, Bahnhofstraße 1")
    kinds = {c.kind for c in clues}
    assert {"phone", "domain", "currency", "pattern"} <= kinds
    votes = country_votes(clues)
    assert next(iter(votes)) == "CH"


@pytest.mark.parametrize(
    ("text", "country"),
    [
        ("서울특별시 종로구 세종대로 175", "KR"),
        ("〒100-0005 東京都千代田区丸の内1丁目", "JP"),
        ("ร้านอาหารไทย เปิดทุกวัน", "TH"),
        ("London SW1A 1AA", "GB"),
        ("Preço R$ 25,90 — CEP 01310-100", "BR"),
        ("www.example.co.in ₹250", "IN"),
        ("ΚΑΦΕΤΕΡΙΑ Αθήνα", "GR"),
        ("Springfield, IL 62701", "US"),
        ("Tel. +48 22 123 45 67, sp. z o.o.", "PL"),
    ],
)
def test_clues_point_at_the_right_country(text: str, country: str) -> None:
    votes = country_votes(extract_clues(text))
    assert votes and next(iter(votes)) == country, votes


def test_vanity_domains_are_weak_and_empty_text_has_no_clues() -> None:
    [clue] = [c for c in extract_clues("visit cool.io") if c.kind == "domain"]
    assert clue.weight < 0.5
    assert extract_clues("") == [] and extract_clues("   ") == []


def test_national_phone_formats_need_a_region() -> None:
    assert not [c for c in extract_clues("Tel 030 1234567") if c.kind == "phone"]
    found = [c for c in extract_clues("Tel 030 1234567", regions=["DE"]) if c.kind == "phone"]
    assert found and found[0].countries == ["DE"]


def test_script_and_language_detection() -> None:
    assert script_profile("Москва abc")["Cyrillic"] > 0.5
    langs = detect_language("Dies ist ein deutscher Satz über den Bahnhof und die Straße.")
    assert langs and langs[0].code == "de"


def test_tldextract_runs_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    def no_network(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket, "create_connection", no_network)
    from geosleuth.tools.clues import _extractor

    _extractor.cache_clear()
    assert extract_clues("www.bahn.de")[0].countries == ["DE"]


def _exif_jpeg(path: Path) -> None:
    im = Image.new("RGB", (64, 48), "white")
    exif = Image.Exif()
    exif[0x010F] = "Canon"
    exif[0x0110] = "EOS R5"
    gps = exif.get_ifd(0x8825)
    gps[1], gps[3] = "S", "W"
    gps[2] = (IFDRational(33), IFDRational(52), IFDRational(1200, 100))
    gps[4] = (IFDRational(151), IFDRational(12), IFDRational(3000, 100))
    exif.get_ifd(0x8769)[0x9003] = "2023:01:02 03:04:05"
    im.save(path, exif=exif)


async def test_exif_gps_from_the_original_file(registry, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "gps.jpg"
    _exif_jpeg(path)
    resized = Image.open(path).resize((32, 24))  # a resized copy has lost its EXIF
    result = await registry.call("exif_gps", {}, ToolContext(image=resized, image_path=str(path)))
    assert result.ok
    assert result.data["lat"] == pytest.approx(-(33 + 52 / 60 + 12 / 3600), abs=1e-6)
    assert result.data["lon"] == pytest.approx(-(151 + 12 / 60 + 30 / 3600), abs=1e-6)
    assert result.data["captured_at"] == "2023:01:02 03:04:05"
    assert "Canon EOS R5" in result.text


def test_exif_hemisphere_signs_decimal_degrees_too() -> None:
    from geosleuth.tools.exif import _dms

    assert _dms(33.5, "S") == _dms((33, 30, 0), "S") == _dms(-33.5, b"S") == -33.5
    assert _dms(151.25, "E") == 151.25 and _dms("n/a", "W") is None


def test_exif_absent() -> None:
    info = read_exif(Image.new("RGB", (10, 10)))
    assert not info.has_exif and "no EXIF" in info.describe()


async def test_tesseract_engine_when_installed() -> None:
    import shutil

    if shutil.which("tesseract") is None:
        pytest.skip("tesseract is not installed")
    reg = build_registry(
        ToolSettings(cache={"backend": "none"}, providers={"ocr": "tesseract"}), names=["ocr"]
    )
    im = _sign(["RUE DE RIVOLI"], _font(LATIN_FONT, 64))
    result = await reg.call("ocr", {}, ToolContext(image=im))
    assert result.ok, result.error
    assert result.provider == "tesseract"
    assert "RIVOLI" in " ".join(line["text"] for line in result.data["lines"]).upper()


def _sign_maker():  # type: ignore[no-untyped-def]
    """examples/make_sign.py, the bundled sign maker (fonts per script)."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "examples" / "make_sign.py"
    spec = importlib.util.spec_from_file_location("make_sign", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_tesseract_words_of_spaceless_scripts_are_joined() -> None:
    from geosleuth.tools.ocr import _join_words

    assert _join_words(["ร", "้", "า", "น", "ก", "า", "แฟ"]) == "ร้านกาแฟ"  # a tone mark read apart
    assert _join_words(["เชียงใหม่", "50200"]) == "เชียงใหม่ 50200"
    assert _join_words(["東京", "タワー", "Tokyo", "Tower"]) == "東京タワー Tokyo Tower"


def test_unsure_lines_yield_to_the_reading_of_their_script() -> None:
    from geosleuth.tools.ocr import merge_readings

    rapid = [
        ("ALBυ MLUN", [335.0, 221.0, 943.0, 324.0], 0.55),  # Thai read as Latin and Greek: unsure
        ("κ ", [900.0, 600.0, 1000.0, 610.0], 0.89),  # a script RapidOCR cannot read, no reading: gone
        (" 50200", [446.0, 461.0, 831.0, 542.0], 0.945),  # sure, but only the digits of a Thai line
        ("Tel. 053 222 345", [423.0, 616.0, 853.0, 683.0], 0.996),  # sure: stays
        ("ΞΞ", [10.0, 10.0, 40.0, 30.0], 0.95),  # foreign script, nothing else read there: dropped
    ]
    tess = [
        ("ร้านกาแฟดอยช้าง", [352.0, 233.0, 931.0, 317.0], 0.93),
        ("เชียงใหม่ 50200", [461.0, 473.0, 821.0, 543.0], 0.83),
        ("ถนนนิมมาน", [490.0, 380.0, 820.0, 440.0], 0.5),  # unsure and beside what was read: not added
        ("ไอ ล |, 053 222 345", [430.0, 625.0, 847.0, 683.0], 0.78),
        ("ซอย 7", [400.0, 300.0, 900.0, 360.0], 0.88),  # RapidOCR saw nothing there: added
        ("ๆ", [1000.0, 700.0, 1010.0, 710.0], 0.3),  # too unsure to add
    ]
    assert [line[0] for line in merge_readings(rapid, tess)] == [
        "ร้านกาแฟดอยช้าง",
        "ซอย 7",
        "เชียงใหม่ 50200",
        "Tel. 053 222 345",
    ]
    # two Tesseract readings of one line: the better one, whatever its script
    box = [0.0, 0.0, 9.0, 9.0]
    merged = merge_readings([("ไล |, 053", box, 0.8)], [("Tel. 053", box, 0.9)], prefer_first=False)
    assert merged == [("Tel. 053", box, 0.9)]


@pytest.mark.parametrize("name", ["busan", "korean_shop"])
def test_hangul_that_rapidocr_does_not_see_is_read(tmp_path: Path, name: str) -> None:
    """RapidOCR's detector misses Hangul lines entirely; the re-read finds them."""
    from geosleuth.tools.ocr import run_ocr, tesseract_languages

    pytest.importorskip("rapidocr", reason="the ocr extra is not installed")
    if "kor" not in tesseract_languages():
        pytest.skip("Tesseract's Korean data not installed (apt-get install tesseract-ocr-kor)")
    maker = _sign_maker()
    if not (maker.FONT_DIR / maker.SCRIPT_FONTS["HANGUL"]).is_file():
        pytest.skip("WenQuanYi Micro Hei not installed (apt-get install fonts-wqy-microhei)")
    spec = next(s for s in maker.SIGN_SET if s.name == name)
    report = run_ocr(Image.open(maker.render_sign(spec.lines, tmp_path / f"{name}.png")))
    text = report.text.replace(" ", "")
    assert "Hangul" in report.engine
    assert spec.lines[0].replace(" ", "") in text


def test_a_thai_sign_is_read_in_thai_and_placed_in_chiang_mai(tmp_path: Path) -> None:
    """RapidOCR reads Thai as garbage; Tesseract's Thai data reads it; the national phone number
    053 … (Chiang Mai's area code) is read in the country the script points to."""
    from geosleuth.agent.offline import locate_offline
    from geosleuth.core.geo import haversine_km
    from geosleuth.tools.ocr import tesseract_languages

    pytest.importorskip("rapidocr", reason="the ocr extra is not installed")
    if not {"tha", "osd"} <= tesseract_languages():
        pytest.skip("Tesseract with Thai and OSD data not installed (apt-get install tesseract-ocr-tha)")
    maker = _sign_maker()
    if not (maker.FONT_DIR / maker.SCRIPT_FONTS["THAI"]).is_file():
        pytest.skip("Noto Sans Thai not installed (apt-get install fonts-noto-core)")
    spec = next(s for s in maker.SIGN_SET if s.name == "chiang_mai")
    image = Image.open(maker.render_sign(spec.lines, tmp_path / "thai.png"))
    result = locate_offline(image, None)
    ocr = next(step for step in result.steps if step.name == "ocr")
    assert "rapidocr+tesseract (Thai)" in ocr.text
    assert any("053 222 345" in e and "Chiang Mai" in e for e in result.prediction.evidence)
    assert result.prediction.country_code == "TH"
    assert float(haversine_km(result.prediction.lat, result.prediction.lon, spec.lat, spec.lon)) < 10


def test_sign_set_without_fonts_writes_the_latin_signs_and_names_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    maker = _sign_maker()
    monkeypatch.setattr(maker, "FONT_DIR", tmp_path / "no-fonts")  # as on a machine without Noto
    skipped: list[str] = []
    rendered = maker.render_set(tmp_path / "signs", skipped)
    latin = [
        s.name
        for s in maker.SIGN_SET
        if all(maker._font_for(c) == maker.LATIN_FONT for c in "".join(s.lines))
    ]
    assert [spec.name for spec, _ in rendered] == latin and latin  # the docstring's promise
    assert sorted(p.stem for p in (tmp_path / "signs").glob("*.png")) == sorted(latin)
    assert sorted(skipped + latin) == sorted(s.name for s in maker.SIGN_SET) and skipped


@pytest.mark.parametrize(
    ("lat", "why"),
    [((IFDRational(47), IFDRational(75), IFDRational(0)), "minutes are 75, not below 60"),
     ((IFDRational(47), IFDRational(3), IFDRational(61)), "seconds are 61, not below 60")],
)  # fmt: skip
def test_exif_gps_minutes_or_seconds_past_60_give_no_position(
    tmp_path: Path, lat: tuple[IFDRational, ...], why: str
) -> None:
    """Issue 41 (low): minutes of 75 were accepted. No position, and the reason is named."""
    path = tmp_path / "gps.jpg"
    exif = Image.Exif()
    lon = (IFDRational(8), IFDRational(18), IFDRational(0))
    exif.get_ifd(0x8825).update({1: "N", 2: lat, 3: "E", 4: lon})
    Image.new("RGB", (32, 24)).save(path, exif=exif)
    info = read_exif(None, str(path))
    assert info.lat is None and info.lon is None
    assert why in (info.gps_problem or "")


def test_exif_gps_signed_rationals_never_flip_the_hemisphere() -> None:
    """Issue 41 (low): 47/-1 degrees under N (a signed rational, which Pillow reads but will not
    write) read as -46.95, the other hemisphere. EXIF GPS rationals are unsigned: no position."""
    from geosleuth.tools.exif import _dms, _gps_problem

    signed = (IFDRational(47, -1), IFDRational(3), IFDRational(0))
    assert _dms(signed, "N", "lat") is None and _dms(signed, "S", "lat") is None
    gps = {1: "N", 2: signed, 3: "E", 4: (IFDRational(8), IFDRational(18), IFDRational(0))}
    assert "latitude degrees are negative" in (_gps_problem(gps) or "")
    assert _dms(-47.05, "N") is None and _dms(-47.05, "S") == -47.05  # plain decimals: the sign must agree
