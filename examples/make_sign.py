"""Render the bundled example image: a synthetic shop sign in Lucerne (Luzern), Switzerland.

The sign shows a real street and town (Hertensteinstrasse, 6004 Luzern) and a phone number
with Lucerne's real area code (+41 41); the shop and the subscriber number are invented.
Run ``python examples/make_sign.py`` to re-create ``examples/luzern_sign.png``.
"""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

OUT = Path(__file__).with_name("luzern_sign.png")


def make_sign(path: Path = OUT) -> Path:
    """Draw a wall, a blue street-name plate and a green shop sign; save as PNG."""
    img = Image.new("RGB", (1280, 860), (196, 186, 170))
    draw = ImageDraw.Draw(img)
    for y in range(0, 860, 48):  # stone courses of the wall
        draw.line([(0, y), (1280, y)], fill=(176, 166, 150), width=3)
    # street-name plate, white on blue as in Swiss towns
    draw.rounded_rectangle([80, 60, 760, 170], radius=14, fill=(22, 64, 150), outline="white", width=6)
    draw.text(
        (420, 115), "Hertensteinstrasse", font=ImageFont.load_default(size=56), fill="white", anchor="mm"
    )
    # shop sign
    draw.rectangle([80, 240, 1200, 780], fill=(24, 78, 52), outline=(220, 200, 140), width=8)
    lines = [
        ("Konditorei Frey", 72, 320),
        ("Hertensteinstrasse 12", 48, 430),
        ("6004 Luzern", 60, 510),
        ("Tel. +41 41 410 23 45", 52, 610),
        ("www.konditorei-frey.ch", 44, 700),
    ]
    for text, size, y in lines:
        draw.text((640, y), text, font=ImageFont.load_default(size=size), fill=(250, 244, 225), anchor="mm")
    img.save(path, format="PNG", optimize=True)
    return path


if __name__ == "__main__":
    print(make_sign())
