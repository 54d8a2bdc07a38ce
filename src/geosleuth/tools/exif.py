"""EXIF metadata of the query photo: GPS position, capture time, camera.

A resized copy of an image usually loses its EXIF block, so the original file (when its
path is known) is read first, from its headers only: no pixel is decoded (Pillow decodes a
whole PNG to find an eXIf chunk written after the image data; here the chunks are walked).
A GPS position counts only with valid hemisphere references (N/S, E/W): any other letter,
or none, leaves the sign unknown, and a wrong sign is a confident answer on the wrong
continent.
"""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path
from typing import Any

from PIL import Image
from pydantic import BaseModel

from geosleuth.bounds.imageio import ImageInputError, open_header

GPS_IFD = 0x8825
EXIF_IFD = 0x8769
_TAGS = {"make": 0x010F, "model": 0x0110, "software": 0x0131, "datetime": 0x0132}
_EXIF_TAGS = {"datetime_original": 0x9003, "offset_time_original": 0x9011, "lens_model": 0xA434}


class ExifInfo(BaseModel):
    has_exif: bool = False
    lat: float | None = None
    lon: float | None = None
    altitude_m: float | None = None
    gps_timestamp: str | None = None
    captured_at: str | None = None
    utc_offset: str | None = None
    camera_make: str | None = None
    camera_model: str | None = None
    lens: str | None = None
    software: str | None = None
    gps_problem: str | None = None  # why a GPS position in the file was not used

    def describe(self) -> str:
        if not self.has_exif:
            return "The image has no EXIF metadata (no GPS, time or camera information)."
        lines = []
        if self.lat is not None and self.lon is not None:
            alt = f", altitude {self.altitude_m:.0f} m" if self.altitude_m is not None else ""
            lines.append(f"GPS position: {self.lat:.6f}, {self.lon:.6f}{alt}")
        elif self.gps_problem:
            lines.append(f"GPS position: unusable ({self.gps_problem})")
        else:
            lines.append("GPS position: none")
        if self.captured_at:
            lines.append(f"Captured at: {self.captured_at}{' ' + self.utc_offset if self.utc_offset else ''}")
        camera = " ".join(x for x in (self.camera_make, self.camera_model) if x)
        if camera:
            lines.append(f"Camera: {camera}")
        if self.lens:
            lines.append(f"Lens: {self.lens}")
        if self.software:
            lines.append(f"Software: {self.software}")
        return "\n".join(lines)


def _num(value: Any) -> float | None:
    try:
        f = float(value)
    except (TypeError, ValueError, ZeroDivisionError):
        return None
    return f if math.isfinite(f) else None


HEMISPHERES = {"lat": ("N", "S"), "lon": ("E", "W")}


def _ref(ref: Any) -> str:
    text = ref.decode("ascii", "replace") if isinstance(ref, bytes) else str(ref or "")
    return text.strip("\x00 ").upper()


def _dms(value: Any, ref: Any, axis: str = "") -> float | None:
    """Degrees/minutes/seconds rationals + hemisphere reference → signed decimal degrees.

    With ``axis`` ("lat" or "lon") the reference must be that axis's letter pair, else None.
    """
    if _value_problem(value) is not None:
        return None
    if not isinstance(value, tuple | list) or len(value) != 3:
        deg = _num(value)  # some writers store plain decimal degrees; the reference still signs them
        if deg is None:
            return None
    else:
        parts = [_num(v) for v in value]
        if any(p is None for p in parts):
            return None
        deg = parts[0] + parts[1] / 60 + parts[2] / 3600  # type: ignore[operator]
    ref_s = _ref(ref)
    if axis and ref_s not in HEMISPHERES[axis]:
        return None
    if deg < 0 and ref_s in {"N", "E"}:  # a negative decimal under N / E: which one is wrong is unknown
        return None
    return -abs(deg) if ref_s in {"S", "W"} else deg


def _gps_problem(gps: Any) -> str | None:
    """Why the GPS block gives no position: a hemisphere reference that cannot sign it, or a value
    that is no number (a rational with a zero denominator, a missing or malformed value)."""
    for axis, tag, name in (("lat", 1, "latitude"), ("lon", 3, "longitude")):
        ref = _ref(gps.get(tag))
        if ref not in HEMISPHERES[axis]:
            shown = repr(ref[:8]) if ref else "missing"
            return f"{name} reference {shown} is not {' or '.join(HEMISPHERES[axis])}"
    for tag, name in ((2, "latitude"), (4, "longitude")):
        problem = _value_problem(gps.get(tag))
        if problem:
            return f"{name} {problem}"
        if (_num(gps.get(tag)) or 0) < 0 and _ref(gps.get(tag - 1)) in {"N", "E"}:
            return f"{name} is negative under reference {_ref(gps.get(tag - 1))!r}"
    return None


_DMS = ("degrees", "minutes", "seconds")


def _value_problem(value: Any) -> str | None:
    """Why a GPS coordinate value is not a number, or None."""
    if value is None:
        return "is missing"
    parts = value if isinstance(value, tuple | list) else (value,)
    if len(parts) not in (1, 3):
        return f"has {len(parts)} parts, not degrees, minutes and seconds"
    for label, part in zip(_DMS, parts, strict=False):
        if getattr(part, "denominator", 1) == 0:
            return f"{label} have a zero denominator ({getattr(part, 'numerator', '?')}/0)"
        number = _num(part)
        if number is None:
            return f"{label} are not a number ({str(part)[:20]!r})"
        if number < 0 and len(parts) == 3:  # EXIF GPS rationals are unsigned: the reference signs them
            return f"{label} are negative ({str(part)[:20]}); the hemisphere comes from the reference"
        if label != "degrees" and number >= 60:
            return f"{label} are {number:g}, not below 60"
    return None


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "replace")
    value = str(value).strip("\x00 ").strip() if value is not None else ""
    return value or None


def read_exif(image: Image.Image | None, path: str | bytes | None = None) -> ExifInfo:
    """EXIF of the original file (a path, or its bytes) when available, headers only; else of the
    in-memory image."""
    exif = None
    if path:
        try:
            exif = exif_from_headers(path)
        except (ImageInputError, OSError, ValueError, SyntaxError, struct.error):
            exif = None
    if (exif is None or not len(exif)) and image is not None:
        exif = image.getexif()
    if exif is None or not len(exif):
        return ExifInfo()
    info = ExifInfo(has_exif=True)
    info.camera_make = _text(exif.get(_TAGS["make"]))
    info.camera_model = _text(exif.get(_TAGS["model"]))
    info.software = _text(exif.get(_TAGS["software"]))
    sub = exif.get_ifd(EXIF_IFD)
    info.captured_at = _text(sub.get(_EXIF_TAGS["datetime_original"])) or _text(exif.get(_TAGS["datetime"]))
    info.utc_offset = _text(sub.get(_EXIF_TAGS["offset_time_original"]))
    info.lens = _text(sub.get(_EXIF_TAGS["lens_model"]))
    gps = exif.get_ifd(GPS_IFD)
    if gps:
        lat, lon = _dms(gps.get(2), gps.get(1), "lat"), _dms(gps.get(4), gps.get(3), "lon")
        if (gps.get(2) is not None or gps.get(4) is not None) and (lat is None or lon is None):
            info.gps_problem = _gps_problem(gps)
        if lat is not None and lon is not None and not (abs(lat) <= 90 and abs(lon) <= 180):
            info.gps_problem = f"position {lat:g}, {lon:g} is outside -90..90, -180..180"
        elif lat is not None and lon is not None and (lat, lon) == (0.0, 0.0):
            info.gps_problem = "position 0, 0 (what a camera without a fix writes)"
        elif lat is not None and lon is not None:
            info.lat, info.lon = round(lat, 7), round(lon, 7)
        alt = _num(gps.get(6))
        if alt is not None:
            info.altitude_m = -alt if gps.get(5) in (1, b"\x01") else alt
        stamp = gps.get(7)
        if isinstance(stamp, tuple | list) and len(stamp) == 3 and gps.get(29):
            h, m, s = (_num(v) or 0.0 for v in stamp)
            info.gps_timestamp = f"{_text(gps.get(29))} {int(h):02d}:{int(m):02d}:{s:05.2f} UTC"
    return info


MAX_EXIF_CHUNK = 1 << 20
"""An eXIf chunk larger than this is not read (EXIF blocks are kilobytes; JPEG's APP1 caps at 64 KB)."""


def exif_from_headers(source: str | Path | bytes) -> Image.Exif:
    """The EXIF of a file (its path or its bytes), read without decoding pixels.

    JPEG, WebP and TIFF keep EXIF in headers Pillow parses on open; a PNG's eXIf chunk may come
    after the image data, where Pillow would decode the whole image to reach it, so the PNG's
    chunks are walked instead (each skipped by its length). Oversized ancillary chunks are never
    read (`geosleuth.bounds.pngchunks`).
    """
    with open_header(source, label="the query image") as im:
        if im.format == "PNG" and "exif" not in im.info:
            data = _png_exif_chunk(source)
            if data is not None:
                im.info["exif"] = data
            return Image.Image.getexif(im)  # the base reader: never loads the pixels
        return im.getexif()


def _png_exif_chunk(source: str | Path | bytes) -> bytes | None:
    with io.BytesIO(source) if isinstance(source, bytes) else Path(source).open("rb") as fp:
        if fp.read(8) != b"\x89PNG\r\n\x1a\n":
            return None
        while True:
            head = fp.read(8)
            if len(head) < 8:
                return None
            length, kind = struct.unpack(">I4s", head)
            if kind == b"eXIf":
                return fp.read(length) if length <= MAX_EXIF_CHUNK else None
            if kind == b"IEND":
                return None
            fp.seek(length + 4, 1)  # the chunk's data and CRC


MAX_EXIF_VALUE_CHARS = 2000
"""Longest EXIF value a dump keeps (a maker note can be tens of kilobytes of binary)."""


def exif_dump(source: str | Path | bytes) -> dict[str, Any]:
    """Every EXIF tag of a file, headers only, by name (``ImageIFD``, ``Exif``, ``GPS`` groups):
    the provenance record of an upload. Bytes become hex, rationals floats, long values are cut
    (with a note); a file without EXIF, or whose EXIF cannot be parsed, gives ``{}`` or an ``error``."""
    from PIL import ExifTags

    try:
        exif = exif_from_headers(source)
    except (ImageInputError, OSError, ValueError, SyntaxError, struct.error) as exc:
        return {"error": f"EXIF unreadable: {type(exc).__name__}"}
    groups: dict[str, Any] = {}
    main = {
        ExifTags.TAGS.get(k, f"0x{k:04x}"): _dump_value(v)
        for k, v in exif.items()
        if k not in (EXIF_IFD, GPS_IFD)
    }
    if main:
        groups["Image"] = main
    for name, ifd, names in (("Exif", EXIF_IFD, ExifTags.TAGS), ("GPS", GPS_IFD, ExifTags.GPSTAGS)):
        try:
            tags = exif.get_ifd(ifd)
        except (OSError, ValueError, SyntaxError, struct.error, KeyError):
            groups[name] = {"error": "unreadable"}
            continue
        if tags:
            groups[name] = {names.get(k, f"0x{k:04x}"): _dump_value(v) for k, v in tags.items()}
    return groups


def _dump_value(value: Any) -> Any:
    if isinstance(value, int):
        return value
    if isinstance(value, tuple | list):
        return [_dump_value(v) for v in value[:64]]
    if isinstance(value, bytes):
        text = value.hex()
    elif isinstance(value, str):
        text = value.replace("\x00", "")
    else:
        number = _num(value)
        if number is not None:
            return number
        text = str(value)
    if len(text) > MAX_EXIF_VALUE_CHARS:
        return text[:MAX_EXIF_VALUE_CHARS] + f"… ({len(text)} characters in all)"
    return text
