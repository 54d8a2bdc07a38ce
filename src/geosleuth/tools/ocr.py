"""OCR on the query image: RapidOCR (models ship inside the wheel) or Tesseract when installed.

Each line comes back with its box in the model's coordinate convention (so the model can
zoom on it), its script, and the text's languages and country clues.
"""

from __future__ import annotations

import csv
import io
import shutil
import subprocess
import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pydantic import BaseModel, Field

from geosleuth.core.text import script_of
from geosleuth.tools.base import BBoxConvention, ToolError
from geosleuth.tools.clues import Clue, LanguageGuess, country_votes, detect_language, extract_clues
from geosleuth.tools.zoom import model_frame, to_original_box

_RAPID_LOCK = threading.Lock()


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
            "rapidocr is not installed: pip install 'geosleuth[ocr]', or configure providers.ocr: tesseract"
        ) from None

    models = Path(rapidocr.__file__).parent / "models"
    # Cap the detector's input at 1600 px: the default ("min" side ≥ 736) blows a 144 px strip up
    # to 4600x736 and costs seconds; small text in huge photos is what the region argument is for.
    params: dict[str, Any] = {
        "Global.log_level": "error",
        "Det.limit_type": "max",
        "Det.limit_side_len": 1600,
    }
    det = sorted(models.glob("*det*.onnx"))
    rec = sorted(models.glob("*rec*.onnx"))
    cls = sorted(models.glob("*cls*.onnx"))
    if det and rec and cls:
        params.update(
            {"Det.model_path": str(det[-1]), "Rec.model_path": str(rec[-1]), "Cls.model_path": str(cls[-1])}
        )
    return RapidOCR(params=params)


def _rapidocr(image: Image.Image) -> list[tuple[str, list[float], float]]:
    engine = rapidocr_engine()
    with _RAPID_LOCK:  # onnxruntime sessions are shared; serialise calls
        result = engine(np.asarray(image.convert("RGB")))
    if result.txts is None or result.boxes is None:
        return []
    out = []
    for text, quad, score in zip(result.txts, result.boxes, result.scores, strict=True):
        xs, ys = [float(p[0]) for p in quad], [float(p[1]) for p in quad]
        out.append((str(text), [min(xs), min(ys), max(xs), max(ys)], float(score)))
    return out


def _tesseract(image: Image.Image, languages: str = "eng") -> list[tuple[str, list[float], float]]:
    exe = shutil.which("tesseract")
    if exe is None:
        raise ToolError("tesseract is not installed; install it or configure providers.ocr: rapidocr")
    buf = io.BytesIO()
    image.convert("RGB").save(buf, format="PNG")
    try:
        proc = subprocess.run(
            [exe, "stdin", "stdout", "-l", languages, "tsv"],
            input=buf.getvalue(),
            capture_output=True,
            timeout=120,
        )
    except subprocess.TimeoutExpired:
        raise ToolError("tesseract took more than 120 s; try a smaller region") from None
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
        out.append((" ".join(w["text"] for w in words), [x1, y1, x2, y2], conf))
    return out


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
    raw = _tesseract(crop, tesseract_languages) if engine == "tesseract" else _rapidocr(crop)
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
        engine=engine,
        lines=lines,
        languages=detect_language(full),
        scripts=list(dict.fromkeys(s for s in (ln.script for ln in lines) if s)),
        clues=clues,
        country_hints=country_votes(clues),
    )
