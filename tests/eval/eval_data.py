"""Small generated benchmarks for the eval tests (images drawn with Pillow, nothing downloaded)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from PIL import Image

# id, lat, lon, country, city
PLACES: list[tuple[str, float, float, str, str]] = [
    ("paris", 48.8566, 2.3522, "France", "Paris"),
    ("berlin", 52.52, 13.405, "Germany", "Berlin"),
    ("tokyo", 35.6762, 139.6503, "Japan", "Tokyo"),
    ("nyc", 40.7128, -74.006, "United States", "New York"),
    ("sydney", -33.8688, 151.2093, "Australia", "Sydney"),
    ("cairo", 30.0444, 31.2357, "Egypt", "Cairo"),
    ("lima", -12.0464, -77.0428, "Peru", "Lima"),
    ("delhi", 28.6139, 77.209, "India", "New Delhi"),
]


def make_image(path: Path, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    image = Image.new("RGB", (64, 48), ((seed * 40) % 256, (seed * 90) % 256, (seed * 150) % 256))
    image.putpixel((seed % 64, seed % 48), (255, 255, 255))
    image.save(path, format="JPEG")


def make_csv_dataset(folder: Path, places=PLACES) -> Path:
    """A folder with ``data.csv`` (id, image, lat, lon, country, city, difficulty) and ``images/``."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country", "city", "difficulty"])
        for i, (sid, lat, lon, country, city) in enumerate(places):
            make_image(folder / "images" / f"{sid}.jpg", i)
            writer.writerow([sid, f"{sid}.jpg", lat, lon, country, city, "easy" if i % 2 == 0 else "hard"])
    return folder


def write_plan(path: Path, plan: dict) -> Path:
    path.write_text(json.dumps(plan))
    return path
