"""OCR on the query image: RapidOCR (models ship inside the wheel) or Tesseract when installed.

Each line comes back with its box in the model's coordinate convention (so the model can
zoom on it), its script, and the text's languages and country clues.

RapidOCR's bundled models read Latin and Chinese; on other scripts they return confident-looking
garbage (a Thai sign read as Greek letters). Where a line is unsure (a low score, or a script
the model cannot read), Tesseract re-reads that part of the image with the language data of the
script the text names (a Greek word RapidOCR read, a phone number's or domain's country; Debian's
``tesseract-ocr-tha`` and friends), or, with no such evidence, of the installed script that reads
its largest unsure line surely (tried one at a time, the likelier first), and each unsure line
is replaced by the better reading of it.
"""

from __future__ import annotations

import csv
import ctypes
import io
import logging
import math
import os
import platform
import shutil
import subprocess
import threading
import unicodedata
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, Field

from geosleuth.bounds.extras import install_line
from geosleuth.bounds.ocr import read_strip, strip_plan, whole_read_scale
from geosleuth.core.text import script_of
from geosleuth.tools.base import BBoxConvention, ToolError
from geosleuth.tools.clues import (
    Clue,
    LanguageGuess,
    country_votes,
    detect_language,
    domain_clues,
    extract_clues,
    phone_clues,
)
from geosleuth.tools.zoom import model_frame, to_original_box

log = logging.getLogger(__name__)
_RAPID_LOCK = threading.Lock()
RAPID_SCRIPTS = frozenset({"Latin", "Han"})
"""Scripts the bundled RapidOCR recognition model was trained on."""
KANA = frozenset({"Hiragana", "Katakana"})
"""Japanese kana: in RapidOCR's dictionary and read as surely as Han (Tokyo's 喫茶さくら at 1.00),
so a sure line of them is its own reading; its garbage for Hebrew is a kana letter or two at 0.6."""
READ_SIDE = 2000
"""RapidOCR reads an image at most this many pixels on its long side (its own preprocessing
limit): the detector finds text at this scale and the recogniser reads from it."""
DET_PIXELS = 512_000
"""Pixels one detector call sees. The detector's working memory grows with its input (about
220 MB per million pixels, measured: a 1600x1200 input peaked 535 MB above the loaded engine,
800x600 took 204 MB), so larger images are read in bands of at most this many pixels."""
BAND_OVERLAP = 96
"""Rows neighbouring bands share: a line up to this tall (at `READ_SIDE` scale) lies whole in one."""
EDGE_PX = 2
"""A band's line whose box reaches this close to a cut edge is a piece; a whole reading wins."""
OVERVIEW_SIDE = 640
"""Side of the overview pass over a banded image: text too tall for a band is found there."""
MMAP_THRESHOLD = 1 << 20
"""glibc serves allocations above this from (and returns them to) the system; see `_return_big_frees`."""
_M_MMAP_THRESHOLD = -3  # mallopt's parameter number in glibc's malloc.h
SURE_SCORE = 0.9
"""A RapidOCR line scoring below this, or in another script, is re-read by Tesseract."""
MIN_TESSERACT_SCORE = 0.8
"""A Tesseract line of its own (no RapidOCR line there) is kept only above this confidence."""
SCRIPT_LANGUAGES: dict[str, str] = {
    "Thai": "tha",
    "Japanese": "jpn",
    "Hangul": "kor",
    "Han": "chi_sim",
    "Cyrillic": "rus",
    "Greek": "ell",
    "Arabic": "ara",
    "Hebrew": "heb",
    "Devanagari": "hin",
    "Bengali": "ben",
    "Gurmukhi": "pan",
    "Gujarati": "guj",
    "Tamil": "tam",
    "Telugu": "tel",
    "Kannada": "kan",
    "Malayalam": "mal",
    "Sinhala": "sin",
    "Georgian": "kat",
    "Armenian": "hye",
    "Ethiopic": "amh",
    "Khmer": "khm",
    "Lao": "lao",
    "Myanmar": "mya",
    "Tibetan": "bod",
}
"""One Tesseract language per script the clue tables know (Debian: tesseract-ocr-tha, …).

Where RapidOCR's reading names no script, they read its largest unsure line one at a time, the
likelier first (`_name_script`): Tesseract's OSD named the right script on 7 of the 27 non-Latin
signs' text areas (too few characters on 15, and on every probe line), and several languages
together cost far more per word."""
REREAD_MAX_PIXELS = 1_200_000
"""The re-read's copy of the text area: a sign stays whole, a photo's texture costs seconds."""
REREAD_TIMEOUT_S = 60.0
SCRIPT_PASS_PIXELS = 400_000
"""The first reading of the text area (and the all-scripts pass, two dozen models at once) is of a
copy this small; the larger one is read only where it left an unsure line unread (`_covers`)."""
SCRIPT_PASS_TIMEOUT_S = 30.0
NAME_SCORE = 0.9
"""A probe line read at this confidence in one language's own letters names its script (`_name_script`)."""
PROBE_PIXELS = 120_000
"""The copy of one unsure line (with its margin) that names the script among several candidates."""
RAPID_EXTRA_SCRIPTS = {"Greek": "Greek", "Hiragana": "Japanese", "Katakana": "Japanese"}
"""Scripts beside Latin and Han that RapidOCR's dictionary holds (its reading of them names them)."""
READ_SCRIPT_SCORE = 0.8
READ_SCRIPT_LETTERS = 3
HAN_FAMILY = frozenset({"Han", "Japanese", "Hiragana", "Katakana"})
"""Chinese and Japanese: RapidOCR reads Han, so text with none of it in its reading is neither."""
COUNTRY_SCRIPTS: dict[str, tuple[str, ...]] = {
    "TH": ("Thai",), "LA": ("Lao",), "KH": ("Khmer",), "MM": ("Myanmar",), "GE": ("Georgian",),
    "AM": ("Armenian",), "GR": ("Greek",), "CY": ("Greek",), "IL": ("Hebrew",), "LK": ("Sinhala", "Tamil"),
    "ET": ("Ethiopic",), "ER": ("Ethiopic",), "KR": ("Hangul",), "KP": ("Hangul",), "JP": ("Japanese",),
    "CN": ("Han",), "TW": ("Han",), "HK": ("Han",), "MO": ("Han",), "BT": ("Tibetan",),
    "NP": ("Devanagari",), "BD": ("Bengali",),
    "IN": ("Devanagari", "Bengali", "Tamil", "Telugu", "Gujarati", "Gurmukhi", "Kannada", "Malayalam"),
    "RU": ("Cyrillic",), "UA": ("Cyrillic",), "BY": ("Cyrillic",), "BG": ("Cyrillic",), "RS": ("Cyrillic",),
    "KZ": ("Cyrillic",), "MK": ("Cyrillic",), "KG": ("Cyrillic",), "MN": ("Cyrillic",),
    "SA": ("Arabic",), "AE": ("Arabic",), "EG": ("Arabic",), "MA": ("Arabic",), "IQ": ("Arabic",),
    "IR": ("Arabic",), "PK": ("Arabic",), "JO": ("Arabic",), "DZ": ("Arabic",), "TN": ("Arabic",),
}  # fmt: skip
"""The scripts a country's signs are written in beside Latin (those `SCRIPT_LANGUAGES` can read)."""
SIGN_PAGE_MODE = 6
"""Tesseract page segmentation for the re-read: one uniform block of text, as on a sign."""
TESSERACT_THREADS = "1"
"""OpenMP threads one Tesseract run may use (``OMP_THREAD_LIMIT``, unless the caller set it). Its
threads spin while they wait; on a busy machine a sign's few lines read 2-3x slower with them
(measured on 2 cores under load: Chiang Mai's text area 1.5-1.8 s with them, 0.4-0.5 s with one)."""
_SPACELESS = frozenset({"Thai", "Lao", "Khmer", "Myanmar", "Han", "Hiragana", "Katakana", "Tibetan"})


class OcrLine(BaseModel):
    text: str
    box: list[float]  # [x1, y1, x2, y2] in the model's convention
    score: float
    script: str | None = None


class OcrReport(BaseModel):
    engine: str
    lines: list[OcrLine] = Field(default_factory=list)
    languages: list[LanguageGuess] = Field(default_factory=list)
    scripts: list[str] = Field(default_factory=list)
    clues: list[Clue] = Field(default_factory=list)
    country_hints: dict[str, float] = Field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def describe(self) -> str:
        if not self.lines:
            return f"No text found ({self.engine})."
        out = [f"Text found ({self.engine}), one line per region [x1, y1, x2, y2]:"]
        out += [
            f"- {ln.text!r} at {[round(v) for v in ln.box]} ({ln.script or 'no letters'})"
            for ln in self.lines
        ]
        if self.languages:
            out.append("Languages: " + ", ".join(f"{g.name} {g.percent}%" for g in self.languages))
        if self.clues:
            out.append(
                "Clues: "
                + "; ".join(f"{c.kind} {c.text!r} → {'/'.join(c.countries[:4])}" for c in self.clues)
            )
        return "\n".join(out)


@lru_cache(maxsize=1)
def rapidocr_engine() -> Any:
    """RapidOCR pinned to the ONNX models inside the installed package: never downloads."""
    try:
        import rapidocr
        from rapidocr import RapidOCR
    except ImportError:
        raise ToolError(
            f"rapidocr is not installed: {install_line('ocr')}, or configure providers.ocr: tesseract"
        ) from None

    _return_big_frees()
    models = Path(rapidocr.__file__).parent / "models"
    # The detector never rescales: `_rapidocr` hands it bands already at the reading scale (the
    # default, "min" side ≥ 736, would blow a 144 px strip up to 4600x736 and cost seconds).
    params: dict[str, Any] = {
        "Global.log_level": "error",
        "Global.max_side_len": READ_SIDE,
        "Det.limit_type": "max",
        "Det.limit_side_len": READ_SIDE,
    }
    det = sorted(models.glob("*det*.onnx"))
    rec = sorted(models.glob("*rec*.onnx"))
    cls = sorted(models.glob("*cls*.onnx"))
    if det and rec and cls:
        params.update(
            {"Det.model_path": str(det[-1]), "Rec.model_path": str(rec[-1]), "Cls.model_path": str(cls[-1])}
        )
    return RapidOCR(params=params)


def _return_big_frees() -> bool:
    """Fix glibc's mmap threshold at `MMAP_THRESHOLD` (a no-op off glibc); true when set.

    onnxruntime (its arena off, RapidOCR's setting) allocates each inference's tensors anew and
    frees them; glibc's sliding threshold then keeps such blocks in its heaps, where they pile
    up and fragment across calls and threads. Measured on offline ``locate`` of a 62 MP PNG:
    peak 405-424 MB with the sliding threshold, 358 MB with it fixed (the decode's own peak)."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    try:
        return bool(ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):
        log.debug("mallopt unavailable; onnxruntime's freed tensors stay in the heap")
        return False


def _rapidocr(image: Image.Image) -> list[tuple[str, list[float], float]]:
    """RapidOCR's lines, boxes in ``image`` pixels, each detector call at most `DET_PIXELS`
    (or the whole reading copy, shrunk to at most `WHOLE_PIXELS` when a little larger, in one call as
    RapidOCR's own: `whole_read_scale`).

    The image is read at most `READ_SIDE` px on its long side (where RapidOCR itself would
    read it); a larger copy in overlapping horizontal bands, so small text is detected at that
    full scale, and an overview at `OVERVIEW_SIDE` px finds the text too tall for a band. A strip
    wider than 8:1, which RapidOCR would pad at full size (gigabytes for a 2000x1 image), is read
    in bounded tiles or skipped (`tools.ocr_bounds`)."""
    strip = strip_plan(*image.size)
    if strip is not None:
        return read_strip(image, strip, _rapidocr_call)
    scale = min(1.0, READ_SIDE / max(image.size))
    work = image if image.mode == "RGB" else image.convert("RGB")
    if scale < 1.0:
        work = work.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))
    whole = whole_read_scale(work.width, work.height)
    if whole is not None:  # one call, as RapidOCR's own (`WHOLE_SHRINK`)
        if whole < 1.0:
            size = (max(1, math.floor(work.width * whole)), max(1, math.floor(work.height * whole)))
            work = work.resize(size)
        return _scaled(_rapidocr_call(work), 1 / (scale * whole))
    # (a piece cut at a seam last, then band before overview, then the better score)
    readings: list[tuple[tuple[int, int, float], tuple[str, list[float], float]]] = []
    for top, bottom in detector_bands(work.width, work.height):
        for text, box, score in _rapidocr_call(work.crop((0, top, work.width, bottom))):
            cut = (top > 0 and box[1] <= EDGE_PX) or (
                bottom < work.height and box[3] >= bottom - top - EDGE_PX
            )
            line = (text, [box[0], box[1] + top, box[2], box[3] + top], score)
            readings.append(((int(cut), 0, -score), line))
    small = OVERVIEW_SIDE / max(work.size)
    overview = work.resize((max(1, round(work.width * small)), max(1, round(work.height * small))))
    for text, box, score in _scaled(_rapidocr_call(overview), 1 / small):
        readings.append(((0, 1, -score), (text, box, score)))
    kept: list[tuple[str, list[float], float]] = []
    for _, line in sorted(readings, key=lambda r: r[0]):
        if all(_overlap(line[1], other[1]) <= 0.5 for other in kept):
            kept.append(line)
    return _scaled(sorted(kept, key=lambda line: (line[1][1], line[1][0])), 1 / scale)


def detector_bands(width: int, height: int) -> list[tuple[int, int]]:
    """Rows ``[top, bottom)`` of the bands one detector call each reads: at most `DET_PIXELS`
    each, together covering every row, neighbours sharing `BAND_OVERLAP` rows (a line up to
    that tall lies whole in one band)."""
    band = max(2 * BAND_OVERLAP, DET_PIXELS // max(width, 1) // 32 * 32)
    if band >= height:
        return [(0, height)]
    step = band - BAND_OVERLAP
    tops = list(range(0, height - band, step)) + [height - band]
    return [(top, top + band) for top in tops]


def _scaled(
    lines: list[tuple[str, list[float], float]], factor: float
) -> list[tuple[str, list[float], float]]:
    if factor == 1.0:
        return lines
    return [(text, [v * factor for v in box], score) for text, box, score in lines]


def _rapidocr_call(image: Image.Image) -> list[tuple[str, list[float], float]]:
    engine = rapidocr_engine()
    with _RAPID_LOCK:  # onnxruntime sessions are shared; serialise calls
        result = engine(np.asarray(image))
    if result.txts is None or result.boxes is None:
        return []
    out = []
    for text, quad, score in zip(result.txts, result.boxes, result.scores, strict=True):
        xs, ys = [float(p[0]) for p in quad], [float(p[1]) for p in quad]
        out.append((str(text), [min(xs), min(ys), max(xs), max(ys)], float(score)))
    return out


def _tesseract(
    image: Image.Image, languages: str = "eng", page_mode: int = 3, timeout_s: float = 120.0
) -> list[tuple[str, list[float], float]]:
    """Tesseract's lines; ``page_mode`` 6 reads the image as one block of text (a sign), where the
    default page analysis (3) loses big, sparse lines of some scripts."""
    exe = shutil.which("tesseract")
    if exe is None:
        raise ToolError("tesseract is not installed; install it or configure providers.ocr: rapidocr")
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    try:
        proc = subprocess.run(
            [exe, "stdin", "stdout", "-l", languages, "--psm", str(page_mode), "tsv"],
            input=buf.getvalue(),
            capture_output=True,
            timeout=timeout_s,
            env={"OMP_THREAD_LIMIT": TESSERACT_THREADS, **os.environ},
        )
    except subprocess.TimeoutExpired:
        raise ToolError(f"tesseract took more than {timeout_s:g} s; try a smaller region") from None
    if proc.returncode != 0:
        raise ToolError(f"tesseract failed: {proc.stderr.decode('utf-8', 'replace')[:200]}")
    lines: dict[tuple[str, str, str], list[dict[str, str]]] = {}
    for row in csv.DictReader(io.StringIO(proc.stdout.decode("utf-8", "replace")), delimiter="\t"):
        if row.get("level") == "5" and (row.get("text") or "").strip() and float(row.get("conf") or -1) >= 0:
            lines.setdefault((row["block_num"], row["par_num"], row["line_num"]), []).append(row)
    out = []
    for words in lines.values():
        x1 = min(int(w["left"]) for w in words)
        y1 = min(int(w["top"]) for w in words)
        x2 = max(int(w["left"]) + int(w["width"]) for w in words)
        y2 = max(int(w["top"]) + int(w["height"]) for w in words)
        conf = sum(float(w["conf"]) for w in words) / len(words) / 100
        out.append((_join_words([w["text"] for w in words]), [x1, y1, x2, y2], conf))
    return out


def _join_words(words: list[str]) -> str:
    """Tesseract's words of one line; scripts written without spaces (Thai, Chinese) are joined
    without them ("ร ้ า น" is one word, "ร้าน")."""
    out = words[0]
    for word in words[1:]:
        marks = all(unicodedata.category(ch).startswith("M") for ch in word)  # a tone mark read apart
        spaceless = (
            _edge_script(out, last=True) in _SPACELESS and _edge_script(word, last=False) in _SPACELESS
        )
        out += word if marks or spaceless else " " + word
    return out


def _edge_script(text: str, last: bool) -> str | None:
    """Script of the first (or last) letter of a word; vowel signs and tone marks are skipped."""
    for ch in reversed(text) if last else text:
        if ch.isalpha():
            return script_of(ch)
    return None


@lru_cache(maxsize=1)
def tesseract_languages() -> frozenset[str]:
    """Language data installed for Tesseract (empty without Tesseract)."""
    exe = shutil.which("tesseract")
    if exe is None:
        return frozenset()
    try:
        proc = subprocess.run([exe, "--list-langs"], capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    lines = proc.stdout.decode("utf-8", "replace").splitlines()
    return frozenset(line.strip() for line in lines[1:] if line.strip())


def _unsure(line: tuple[str, list[float], float]) -> bool:
    return line[2] < SURE_SCORE or not _own_reading(line)


def _own_reading(line: tuple[str, list[float], float]) -> bool:
    """Whether a RapidOCR line is in a script it reads: Latin or Han (or none), or kana read surely."""
    script = script_of(line[0])
    return script in RAPID_SCRIPTS | {None} or (script in KANA and line[2] >= SURE_SCORE)


def _overlap(a: list[float], b: list[float]) -> float:
    """Intersection over the smaller box: the same line read by two engines overlaps near 1."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    smaller = min((a[2] - a[0]) * (a[3] - a[1]), (b[2] - b[0]) * (b[3] - b[1]))
    return w * h / smaller if smaller > 0 else 0.0


def merge_readings(
    rapid: list[tuple[str, list[float], float]],
    tess: list[tuple[str, list[float], float]],
    prefer_first: bool = True,
) -> list[tuple[str, list[float], float]]:
    """RapidOCR's sure lines stay; each unsure one yields to the Tesseract reading of the same
    line when that scores higher, and a line in a script RapidOCR cannot read (its garbage) to
    any reading, or goes; Tesseract lines where RapidOCR saw nothing are added. With
    ``prefer_first`` false both are Tesseract readings and each line keeps the better one."""
    out: list[tuple[str, list[float], float]] = []
    used: set[int] = set()
    for line in rapid:
        match = max(
            ((i, t) for i, t in enumerate(tess) if _overlap(line[1], t[1]) > 0.5),
            key=lambda it: it[1][2],
            default=None,
        )
        if match is not None:
            used.add(match[0])
        foreign = prefer_first and not _own_reading(line)  # its garbage
        unsure = _unsure(line) if prefer_first else True  # two Tesseract readings: the better one
        # digits alone where Tesseract read words too: RapidOCR kept "50200" of "เชียงใหม่ 50200"
        partial = prefer_first and script_of(line[0]) is None and match is not None and script_of(match[1][0])
        if match is not None and (foreign or partial or (unsure and match[1][2] > line[2])):
            out.append(match[1])
        elif not foreign:
            out.append(line)
    out += [t for i, t in enumerate(tess) if i not in used and t[2] >= MIN_TESSERACT_SCORE]
    return sorted(out, key=lambda line: (line[1][1], line[1][0]))


def _rapidocr_checked(image: Image.Image) -> tuple[list[tuple[str, list[float], float]], str]:
    """RapidOCR, with its unsure lines re-read by Tesseract.

    The text's area is re-read (RapidOCR's detector misses lines of scripts it was not trained
    on, not only misreads them: the box around everything it saw, with a margin, or the whole
    image when it saw nothing) with the data of the script that reads it (`_reread`: named by the
    text's own evidence, else by candidate scripts tried one at a time on the largest unsure
    line), and the better reading of each line is kept. Every pass reads a bounded copy within a
    time limit (`SCRIPT_PASS_PIXELS`, `REREAD_MAX_PIXELS`): a textured photo with no text costs
    seconds, not minutes; a re-read that fails or runs out of time leaves RapidOCR's reading as
    it was. Each Tesseract reading is made once (``readings``), whichever step asks for it."""
    raw = _rapidocr(image)
    installed = tesseract_languages()
    if (raw and not any(_unsure(line) for line in raw)) or not any(
        code in installed for code in SCRIPT_LANGUAGES.values()
    ):
        return raw, "rapidocr"

    readings: dict[tuple[str, float, float, tuple[int, int]], list[tuple[str, list[float], float]]] = {}

    def read(
        spec: str, max_pixels: int, timeout_s: float, around: list[tuple[str, list[float], float]] = raw
    ) -> list[tuple[str, list[float], float]]:
        view, (ox, oy), k = _reread_view(image, around, max_pixels)
        key = (spec, ox, oy, view.size)  # a text area within the small copy's pixels is read once
        if key not in readings:
            readings[key] = _tesseract(view, spec, SIGN_PAGE_MODE, timeout_s=timeout_s)
        found = readings[key]
        return [(t, [b[0] / k + ox, b[1] / k + oy, b[2] / k + ox, b[3] / k + oy], c) for t, b, c in found]

    try:
        tess = _reread(read, reread_scripts(raw), installed, [line for line in raw if _unsure(line)])
    except ToolError as exc:
        log.info("the Tesseract re-read gave up (%s); RapidOCR's reading stands", exc)
        return raw, "rapidocr"
    merged = merge_readings(raw, tess)
    scripts = sorted({s for s in (script_of(text) for text, _, _ in merged) if s and s not in RAPID_SCRIPTS})
    return merged, "rapidocr+tesseract" + (f" ({', '.join(scripts)})" if scripts else "")


def reread_scripts(raw: list[tuple[str, list[float], float]]) -> list[str]:
    """The scripts the re-read tries, decided from RapidOCR's own reading before any Tesseract pass.

    Each script Tesseract loads costs its model (Japanese and Chinese about a second each), so the
    text's own evidence narrows them: a script RapidOCR truly reads (Greek, kana) in a sure-enough
    line, else the scripts of the country an international phone number or a country domain names
    (+66 → Thai, .ge → Georgian), else every script but Chinese and Japanese when RapidOCR, at home
    in Han, saw none of it. The order is the likelier first: where RapidOCR read Han letters it
    was unsure of, Korean first (it reads Chinese and Japanese surely; Hangul comes out as Han
    look-alikes, Busan's 해운대 횟집 as 良H吾), then Japanese and Chinese."""
    seen = _read_scripts(raw)
    if seen:
        return seen
    text = "\n".join(line[0] for line in raw)
    named: list[str] = []
    for clue in [*phone_clues(text), *domain_clues(text)]:
        if len(clue.countries) == 1:
            named += [s for s in COUNTRY_SCRIPTS.get(clue.countries[0], ()) if s not in named]
    if named:
        return named
    han = any(script_of(ch) in HAN_FAMILY for text, _, _ in raw for ch in text if ch.isalpha())
    if not han:
        return [s for s in SCRIPT_LANGUAGES if s not in HAN_FAMILY]
    return list(dict.fromkeys(["Hangul", "Japanese", "Han", *SCRIPT_LANGUAGES]))


def _read_scripts(raw: list[tuple[str, list[float], float]]) -> list[str]:
    """Scripts RapidOCR's dictionary holds beside Latin and Han, read in a line scoring at least
    `READ_SCRIPT_SCORE` with `READ_SCRIPT_LETTERS` letters of it (its garbage for Thai is a
    low-scoring Greek letter or two)."""
    out: list[str] = []
    for text, _, score in raw:
        letters = [RAPID_EXTRA_SCRIPTS.get(script_of(ch) or "") for ch in text if ch.isalpha()]
        out += [
            s
            for s in dict.fromkeys(x for x in letters if x)
            if score >= READ_SCRIPT_SCORE and letters.count(s) >= READ_SCRIPT_LETTERS and s not in out
        ]
    return out


def _reread(
    read: Callable[..., list[tuple[str, list[float], float]]],
    scripts: list[str],
    installed: frozenset[str],
    unsure: list[tuple[str, list[float], float]] | None = None,
) -> list[tuple[str, list[float], float]]:
    """Tesseract's reading of the text area. Several candidate scripts: the likeliest reads the
    small copy of the text area, and where that reads the largest ``unsure`` line surely it names
    the script and its reading stands; else the others, one at a time, read that line's own area
    (`_name_script`; a line costs a fraction of the whole text), and the one that names the script
    is then the one candidate. One candidate script: its data alone reads the small copy, and the
    large one too (each line the better of the two readings; a line lost at one scale is often
    read at the other) unless the small copy already re-read every unsure line with confidence
    (`_covers`). When neither finds any of the script, every script is tried after all, together
    on the small copy, then the script they name alone reads the large copy."""
    unsure = unsure or []
    languages = [code for code in dict.fromkeys(SCRIPT_LANGUAGES[s] for s in scripts) if code in installed]
    probe = _probe(unsure)
    if len(languages) > 1 and probe:
        likeliest = read(languages[0], SCRIPT_PASS_PIXELS, SCRIPT_PASS_TIMEOUT_S)

        def read_probe(spec: str) -> list[tuple[str, list[float], float]]:
            if spec == languages[0]:  # its reading of the whole text area holds the probe line's
                return [line for line in likeliest if _overlap(probe[0][1], line[1]) > 0.5]
            return read(spec, PROBE_PIXELS, SCRIPT_PASS_TIMEOUT_S, probe)

        named = _name_script(read_probe, languages)
        if named is not None:
            scripts, languages = [named], [SCRIPT_LANGUAGES[named]]
    if len(languages) == 1:
        alone = read(languages[0], SCRIPT_PASS_PIXELS, SCRIPT_PASS_TIMEOUT_S)
        if not _covers(alone, unsure, scripts):
            alone = merge_readings(
                read(languages[0], REREAD_MAX_PIXELS, REREAD_TIMEOUT_S), alone, prefer_first=False
            )
        found = _dominant_script([line for line in alone if line[2] >= MIN_TESSERACT_SCORE])
        if found in scripts or (found in HAN_FAMILY and "Japanese" in scripts):
            return alone
        languages = [code for code in dict.fromkeys(SCRIPT_LANGUAGES.values()) if code in installed]
    if not languages:
        return []
    tess = read("+".join(languages), SCRIPT_PASS_PIXELS, SCRIPT_PASS_TIMEOUT_S)
    script = _dominant_script([line for line in tess if line[2] >= MIN_TESSERACT_SCORE])
    if script in SCRIPT_LANGUAGES and SCRIPT_LANGUAGES[script] in installed:
        alone = read(SCRIPT_LANGUAGES[script], REREAD_MAX_PIXELS, REREAD_TIMEOUT_S)
        tess = merge_readings(alone, tess, prefer_first=False)
    return tess


def _covers(
    reading: list[tuple[str, list[float], float]],
    unsure: list[tuple[str, list[float], float]],
    scripts: list[str],
) -> bool:
    """Whether ``reading`` re-read each of RapidOCR's ``unsure`` lines (at least one) with
    confidence, and in one of ``scripts`` where it read letters of any but Latin: then a larger
    copy has nothing left to add (on the sign set it changed no reading)."""
    if not unsure:
        return False
    sure = [line for line in reading if line[2] >= MIN_TESSERACT_SCORE]
    for _, box, _ in unsure:
        match = [line for line in sure if _overlap(box, line[1]) > 0.5]
        script = _dominant_script(match)
        if not match or (script is not None and not any(script in _letters_of(s) for s in scripts)):
            return False
    return True


def _letters_of(script: str) -> frozenset[str]:
    """The Unicode scripts a `SCRIPT_LANGUAGES` script writes in (Japanese: kana and Han)."""
    return HAN_FAMILY - {"Japanese"} if script == "Japanese" else frozenset({script})


def _probe(raw: list[tuple[str, list[float], float]]) -> list[tuple[str, list[float], float]]:
    """RapidOCR's largest unsure line (a sign's title, in a script it could not read), or none."""
    unsure = [line for line in raw if _unsure(line)]
    return (
        [max(unsure, key=lambda line: (line[1][2] - line[1][0]) * (line[1][3] - line[1][1]))]
        if unsure
        else []
    )


def _name_script(
    read: Callable[[str], list[tuple[str, list[float], float]]], languages: list[str]
) -> str | None:
    """The script of the probe line ``read`` reads, one language at a time in the given order (the
    likelier first), or None. The first whose own letters read the line at `NAME_SCORE` names it;
    when none does, the surest reading of at least `MIN_TESSERACT_SCORE`. One language a pass costs
    a tenth of a second on a line, several together far more (Tesseract tries each on every word:
    four 1 s, 22 6 s); and no wrong script reached `NAME_SCORE` on the sign set, where Thai's data
    reads Greek, Arabic or Armenian at up to 0.84."""
    scripts = {code: s for s, code in SCRIPT_LANGUAGES.items()}
    scores: dict[str, float] = {}
    for code in languages:
        script = scripts[code]
        scores[script] = max(_own_score(read(code), s) for s in _letters_of(script))
        if scores[script] >= NAME_SCORE:
            return script
    best = max(scores, key=scores.__getitem__, default=None)
    return best if best is not None and scores[best] >= MIN_TESSERACT_SCORE else None


def _own_score(lines: list[tuple[str, list[float], float]], script: str) -> float:
    """The best confidence of a line read in ``script`` (0 when none is)."""
    return max(
        (score for text, _, score in lines if _dominant_script([(text, [], score)]) == script), default=0.0
    )


def _reread_view(
    image: Image.Image, raw: list[tuple[str, list[float], float]], max_pixels: int
) -> tuple[Image.Image, tuple[float, float], float]:
    """(the part of the image to re-read, its offset, its scale): the box around RapidOCR's lines
    with a margin of half its height (lines it missed sit between and around them), reduced to
    at most ``max_pixels``."""
    x1, y1, x2, y2 = 0.0, 0.0, float(image.width), float(image.height)
    if raw:
        x1, y1 = min(b[0] for _, b, _ in raw), min(b[1] for _, b, _ in raw)
        x2, y2 = max(b[2] for _, b, _ in raw), max(b[3] for _, b, _ in raw)
        mx, my = 0.1 * (x2 - x1) + 16, 0.5 * (y2 - y1) + 16
        x1, y1 = max(0.0, x1 - mx), max(0.0, y1 - my)
        x2, y2 = min(float(image.width), x2 + mx), min(float(image.height), y2 + my)
    box = (int(x1), int(y1), max(int(x1) + 1, int(x2)), max(int(y1) + 1, int(y2)))
    view = image.crop(box)
    scale = min(1.0, math.sqrt(max_pixels / (view.width * view.height)))
    if scale < 1.0:
        view = view.resize(
            (max(1, round(view.width * scale)), max(1, round(view.height * scale))), Image.LANCZOS
        )
    return view, (float(box[0]), float(box[1])), scale


def _dominant_script(lines: list[tuple[str, list[float], float]]) -> str | None:
    """The script most letters of the lines are in, Latin aside (RapidOCR reads Latin)."""
    counts: dict[str, int] = {}
    for text, _, _ in lines:
        for ch in text:
            script = script_of(ch) if ch.isalpha() else None
            if script is not None and script != "Latin":
                counts[script] = counts.get(script, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else None


def run_ocr(
    image: Image.Image,
    engine: str = "rapidocr",
    region: Sequence[float] | None = None,
    convention: BBoxConvention = "absolute",
    model_scale: float = 1.0,
    min_score: float = 0.5,
    tesseract_languages: str = "eng",
    model_size: tuple[int, int] | None = None,
) -> OcrReport:
    """Read the text of the image (or of ``region``), with boxes in the model's convention."""
    ox, oy = 0, 0
    crop = image
    if region is not None:
        box, _ = to_original_box(
            list(region), image.size, convention, model_scale, min_side=8, arg="region", model_size=model_size
        )
        crop = image.crop((box.x1, box.y1, box.x2, box.y2))
        ox, oy = box.x1, box.y1
    if engine == "tesseract":
        raw, used = _tesseract(crop, tesseract_languages), engine
    else:
        raw, used = _rapidocr_checked(crop)
    fw, fh = model_frame(image.width, image.height, convention, model_scale, model_size)
    sx, sy = fw / image.width, fh / image.height
    lines = [
        OcrLine(
            text=text,
            box=[
                round((b[0] + ox) * sx, 1),
                round((b[1] + oy) * sy, 1),
                round((b[2] + ox) * sx, 1),
                round((b[3] + oy) * sy, 1),
            ],
            score=round(score, 3),
            script=script_of(text),
        )
        for text, b, score in raw
        if score >= min_score and text.strip()
    ]
    full = "\n".join(line.text for line in lines)
    clues = extract_clues(full)
    return OcrReport(
        engine=used,
        lines=lines,
        languages=detect_language(full),
        scripts=list(dict.fromkeys(s for s in (ln.script for ln in lines) if s)),
        clues=clues,
        country_hints=country_votes(clues),
    )
