"""The re-read's script is decided from RapidOCR's own reading before any Tesseract pass."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.tools import ocr
from geosleuth.tools.ocr import _covers, _name_script, reread_scripts

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


def test_han_garbage_tries_korean_first() -> None:
    """RapidOCR reads Chinese and Japanese surely; unsure Han letters are most often Hangul."""
    scripts = reread_scripts([("良H吾", BOX, 0.69), ("051-746-1234", BOX, 1.0)])
    assert scripts[:3] == ["Hangul", "Japanese", "Han"] and len(scripts) == len(set(scripts))
    assert reread_scripts([("υ M", BOX, 0.67)])[0] == "Thai"  # no Han read: the table's order


def test_kana_read_surely_is_rapidocrs_own_reading() -> None:
    """RapidOCR reads Japanese as surely as Chinese: a sure kana line needs no re-read and stays
    in the merge; a low-scoring kana letter or two (its garbage for Hebrew) does not."""
    title, garbage = ("喫茶さくら", BOX, 1.0), ("ユ 7n", [0.0, 40.0, 100.0, 60.0], 0.63)
    assert not ocr._unsure(title) and ocr._unsure(garbage)
    assert ocr.merge_readings([title, garbage], []) == [title]


def _reader(scores: dict[str, tuple[str, float]], asked: list[str]):  # type: ignore[no-untyped-def]
    """A probe reader that answers each language with a fixed line, recording what it was asked."""

    def read(spec: str) -> list[tuple[str, list[float], float]]:
        asked.append(spec)
        text, score = scores.get(spec, ("", 0.0))
        return [(text, BOX, score)] if text else []

    return read


def test_the_first_language_reading_the_probe_surely_names_it_and_stops() -> None:
    asked: list[str] = []
    read = _reader({"tha": ("ทอแ 7ภาว", 0.78), "kor": ("해운대 횟집", 0.95), "rus": ("Кафе", 0.97)}, asked)
    assert _name_script(read, ["tha", "kor", "rus"]) == "Hangul"
    assert asked == ["tha", "kor"]  # one language a pass; none after the one that named it


def test_letters_of_another_script_name_nothing() -> None:
    """Thai's data reads an Armenian line as Thai at 0.8: below the naming bar, so every candidate
    is read, and the surest of at least 0.8 in its own letters names the script."""
    asked: list[str] = []
    read = _reader({"tha": ("ทอแ", 0.8), "hye": ("Երևան", 0.85), "kat": ("ABC", 0.99)}, asked)
    assert _name_script(read, ["tha", "kat", "hye"]) == "Armenian" and asked == ["tha", "kat", "hye"]
    assert _name_script(_reader({"tha": ("ทอแ", 0.6)}, []), ["tha", "kor"]) is None


def test_japanese_is_named_by_kana_or_kanji() -> None:
    assert _name_script(_reader({"jpn": ("喫茶さくら", 0.93)}, []), ["kor", "jpn"]) == "Japanese"


def test_the_small_copy_covers_the_unsure_lines_when_it_reads_each_surely() -> None:
    line_a, line_b = [0.0, 0.0, 100.0, 20.0], [0.0, 40.0, 100.0, 60.0]
    unsure = [("良H吾", line_a, 0.67), ("", line_b, 0.5)]
    both = [("해운대 횟집", line_a, 0.95), ("051", line_b, 0.9)]
    assert _covers(both, unsure, ["Hangul"])
    assert not _covers(both[:1], unsure, ["Hangul"])  # a line left unread
    assert not _covers([both[0], ("051", line_b, 0.6)], unsure, ["Hangul"])  # read unsurely
    assert not _covers(both, unsure, ["Thai"])  # read in another script
    assert not _covers(both, [], ["Hangul"])  # RapidOCR saw nothing: no evidence of where text is


def _maker():  # type: ignore[no-untyped-def]
    path = Path(__file__).resolve().parents[2] / "examples" / "make_sign.py"
    spec = importlib.util.spec_from_file_location("make_sign", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _count_passes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The languages of each real Tesseract pass, in order, as they run."""
    passes: list[str] = []
    real = ocr._tesseract

    def counted(image: Image.Image, languages: str = "eng", *args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        passes.append(languages)
        return real(image, languages, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ocr, "_tesseract", counted)
    return passes


def _sign(tmp_path: Path, name: str, font: str, code: str | None = None) -> Image.Image:
    """Sign ``name`` of the sign set, skipping where the OCR extra, Tesseract's ``code`` data or
    the sign's font is not installed."""
    pytest.importorskip("rapidocr", reason="the ocr extra is not installed")
    if code is not None and code not in ocr.tesseract_languages():
        pytest.skip(f"Tesseract's {code} data not installed (apt-get install tesseract-ocr-{code})")
    maker = _maker()
    if not (maker.FONT_DIR / maker.SCRIPT_FONTS[font]).is_file():
        pytest.skip("the sign's font is not installed (apt-get install fonts-noto-core fonts-wqy-microhei)")
    spec = next(s for s in maker.SIGN_SET if s.name == name)
    return Image.open(maker.render_sign(spec.lines, tmp_path / f"{name}.png"))


def test_a_georgian_sign_with_its_phone_number_is_read_in_georgian_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """+995 names Georgia: Tesseract reads Georgian alone, never every script together, and once:
    the small copy reads both unsure lines surely, so the large one is not read."""
    image = _sign(tmp_path, "tbilisi", "GEORGIAN", "kat")
    passes = _count_passes(monkeypatch)
    report = ocr.run_ocr(image)
    assert passes == ["kat"]
    assert "თბილისი" in report.text.replace(" ", "") and "Georgian" in report.engine


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "font", "code", "word"),
    [
        ("chiang_mai", "THAI", "tha", "เชียงใหม่"),
        ("busan", "HANGUL", "kor", "해운대"),
        ("tel_aviv", "HEBREW", "heb", "תלאביב"),
    ],
)
def test_an_undecided_sign_names_its_script_one_language_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, font: str, code: str, word: str
) -> None:
    """A national-format phone number names no country: the script is named from RapidOCR's largest
    unsure line, one language a pass in the order RapidOCR's reading makes likelier (Busan's Han
    look-alikes: Korean first; Chiang Mai's Latin-looking garbage: Thai first). The likeliest reads
    the whole text area at once, which names it on those two signs; Tel Aviv's Hebrew is tried on
    the line after seven others, then reads the text area."""
    image = _sign(tmp_path, name, font, code)
    passes = _count_passes(monkeypatch)
    report = ocr.run_ocr(image)
    assert all("+" not in p for p in passes), passes  # never several languages together
    if name != "tel_aviv":
        assert passes == [code]  # the likeliest script read the text area and named itself there
    else:
        assert passes[-2:] == [code, code] and len(set(passes[:-1])) == len(passes) - 1, passes
    assert word in report.text.replace(" ", ""), report.text


@pytest.mark.slow
def test_a_japanese_sign_rapidocr_reads_surely_keeps_its_title_without_tesseract(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = _sign(tmp_path, "tokyo", "CJK")
    passes = _count_passes(monkeypatch)
    report = ocr.run_ocr(image)
    assert passes == [] and report.engine == "rapidocr"
    assert "喫茶" in report.text and "さくら" in report.text and "東京都渋谷区" in report.text
