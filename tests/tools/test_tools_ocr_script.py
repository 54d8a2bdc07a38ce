"""The re-read's script is decided from RapidOCR's own reading before any Tesseract pass."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.tools import ocr
from geosleuth.tools.ocr import reread_scripts

BOX = [0.0, 0.0, 100.0, 20.0]


def test_a_script_rapidocr_reads_names_itself() -> None:
    assert reread_scripts([("Θεσσαλονίκη", BOX, 0.87), ("Tel. 2310 234567", BOX, 0.97)]) == ["Greek"]
    assert reread_scripts([("ラーメン屋", BOX, 0.9)]) == ["Japanese"]


def test_its_garbage_does_not_name_a_script() -> None:
    """Thai read as a Greek letter or two at a low score (RapidOCR's garbage) names nothing."""
    scripts = reread_scripts([("υ M", BOX, 0.67), ("Tel. 053 222 345", BOX, 1.0)])
    assert "Greek" in scripts and len(scripts) > 10  # undecided: every script is tried
    assert not {"Han", "Japanese"} & set(scripts)  # but no Chinese or Japanese without any Han read


def test_a_phone_number_or_domain_names_the_country_and_its_script() -> None:
    assert reread_scripts([("υ M", BOX, 0.67), ("+66 53 222 345", BOX, 1.0)]) == ["Thai"]
    assert reread_scripts([("ònmoo", BOX, 0.73), ("+995 32 212 3456", BOX, 0.99)]) == ["Georgian"]
    assert reread_scripts([("GOER", BOX, 0.7), ("www.tea.lk", BOX, 0.95)]) == ["Sinhala", "Tamil"]


def test_han_garbage_keeps_chinese_japanese_and_korean() -> None:
    scripts = reread_scripts([("良H吾", BOX, 0.69), ("051-746-1234", BOX, 1.0)])
    assert {"Han", "Japanese", "Hangul"} <= set(scripts)


def _maker():  # type: ignore[no-untyped-def]
    path = Path(__file__).resolve().parents[2] / "examples" / "make_sign.py"
    spec = importlib.util.spec_from_file_location("make_sign", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_a_georgian_sign_with_its_phone_number_is_read_in_georgian_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """+995 names Georgia: Tesseract reads Georgian alone (a small and a large copy), never every
    script together."""
    pytest.importorskip("rapidocr", reason="the ocr extra is not installed")
    if "kat" not in ocr.tesseract_languages():
        pytest.skip("Tesseract's Georgian data not installed (apt-get install tesseract-ocr-kat)")
    maker = _maker()
    if not (maker.FONT_DIR / maker.SCRIPT_FONTS["GEORGIAN"]).is_file():
        pytest.skip("Noto Sans Georgian not installed (apt-get install fonts-noto-core)")
    spec = next(s for s in maker.SIGN_SET if s.name == "tbilisi")
    image = Image.open(maker.render_sign(spec.lines, tmp_path / "tbilisi.png"))
    passes: list[str] = []
    real = ocr._tesseract

    def counted(image: Image.Image, languages: str = "eng", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        passes.append(languages)
        return real(image, languages, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ocr, "_tesseract", counted)
    report = ocr.run_ocr(image)
    assert passes == ["kat", "kat"]
    assert "თბილისი" in report.text.replace(" ", "") and "Georgian" in report.engine


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "font", "code", "word"),
    [("chiang_mai", "THAI", "tha", "เชียงใหม่"), ("tel_aviv", "HEBREW", "heb", "תלאביב")],
)
def test_an_undecided_sign_names_its_script_a_few_languages_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, font: str, code: str, word: str
) -> None:
    """A national-format phone number names no country: the script is named from RapidOCR's largest
    unsure line, four languages a pass (Tesseract's cost grows faster than their number); Tel
    Aviv's group reads Greek letters beside Hebrew, and Hebrew alone reads the line surer."""
    pytest.importorskip("rapidocr", reason="the ocr extra is not installed")
    if code not in ocr.tesseract_languages():
        pytest.skip(f"Tesseract's {code} data not installed (apt-get install tesseract-ocr-{code})")
    maker = _maker()
    if not (maker.FONT_DIR / maker.SCRIPT_FONTS[font]).is_file():
        pytest.skip("the Noto font is not installed (apt-get install fonts-noto-core)")
    spec = next(s for s in maker.SIGN_SET if s.name == name)
    image = Image.open(maker.render_sign(spec.lines, tmp_path / f"{name}.png"))
    passes: list[str] = []
    real = ocr._tesseract

    def counted(image: Image.Image, languages: str = "eng", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        passes.append(languages)
        return real(image, languages, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ocr, "_tesseract", counted)
    report = ocr.run_ocr(image)
    assert passes and max(len(p.split("+")) for p in passes) <= ocr.SCRIPT_GROUP, passes
    assert passes[-1] == code, passes  # then the named script alone reads the text area
    assert word in report.text.replace(" ", ""), report.text
