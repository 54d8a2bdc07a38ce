"""The tiny photo dataset the harness tests run on."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_helpers import PHOTOS
from PIL import Image


@pytest.fixture
def photo_dataset(tmp_path: Path) -> Path:
    """A generic CSV dataset of three photos, solid colours whose red channel (0, 40, 80) tells
    scripted models which photo they were shown."""
    folder = tmp_path / "photos"
    (folder / "images").mkdir(parents=True)
    lines = ["id,image,lat,lon,country,city"]
    for i, (sid, lat, lon, country, city) in enumerate(PHOTOS):
        Image.new("RGB", (64, 48), (40 * i, 120, 200)).save(folder / "images" / f"{sid}.png")
        lines.append(f"{sid},{sid}.png,{lat},{lon},{country},{city}")
    (folder / "data.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
