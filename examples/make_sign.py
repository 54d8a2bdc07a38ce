"""Synthetic shop signs: the bundled example (Luzern) and a set of signs in many scripts.

``examples/luzern_sign.png`` shows a real street and town (Hertensteinstrasse, 6004 Luzern)
and a phone number with Lucerne's real area code (+41 41); the shop and the subscriber number
are invented. `SIGN_SET` holds 61 signs from 50 cities in 15 scripts, with real place names,
postcodes and area codes and invented shops and numbers: some carry strong evidence (a phone
number, a city name), some only a script or a language, and some a name several places share
(Córdoba, Paris, London), so that the offline pipeline's confidence can be checked against how
often it is right (``bench/calibration_bench.py``).

``python examples/make_sign.py`` re-creates ``examples/luzern_sign.png``;
``python examples/make_sign.py --set DIR`` renders the whole set into DIR (needs the Noto and
WenQuanYi fonts, Debian's ``fonts-noto-core`` and ``fonts-wqy-microhei``; without them only the
Latin signs render, in Pillow's own font).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

OUT = Path(__file__).with_name("luzern_sign.png")
FONT_DIR = Path("/usr/share/fonts/truetype")
LATIN_FONT = "noto/NotoSans-Regular.ttf"  # Latin, Greek, Cyrillic, digits and punctuation
SCRIPT_FONTS = {
    "THAI": "noto/NotoSansThai-Regular.ttf",
    "LAO": "noto/NotoSansLao-Regular.ttf",
    "KHMER": "noto/NotoSansKhmer-Regular.ttf",
    "GEORGIAN": "noto/NotoSansGeorgian-Regular.ttf",
    "ARMENIAN": "noto/NotoSansArmenian-Regular.ttf",
    "HEBREW": "noto/NotoSansHebrew-Regular.ttf",
    "ARABIC": "noto/NotoSansArabic-Regular.ttf",
    "DEVANAGARI": "noto/NotoSansDevanagari-Regular.ttf",
    "BENGALI": "noto/NotoSansBengali-Regular.ttf",
    "SINHALA": "noto/NotoSansSinhala-Regular.ttf",
    "ETHIOPIC": "noto/NotoSansEthiopic-Regular.ttf",
    "CJK": "wqy/wqy-microhei.ttc",
    "HIRAGANA": "wqy/wqy-microhei.ttc",
    "KATAKANA": "wqy/wqy-microhei.ttc",
    "HANGUL": "wqy/wqy-microhei.ttc",
}
"""Unicode name prefix of a character -> the font that draws it (Debian's font packages)."""


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


@dataclass(frozen=True)
class SignSpec:
    """One sign of the set and where it stands (the city centre: the sign is in town)."""

    name: str
    country_code: str
    lat: float
    lon: float
    lines: tuple[str, ...]


SIGN_SET: tuple[SignSpec, ...] = (
    SignSpec(
        "chiang_mai",
        "TH",
        18.7904,
        98.9847,
        ("ร้านกาแฟ ดอยช้าง", "ถนนนิมมานเหมินท์ ซอย 7", "เชียงใหม่ 50200", "Tel. 053 222 345"),
    ),
    SignSpec(
        "bangkok",
        "TH",
        13.7540,
        100.5014,
        ("ร้านข้าวมันไก่", "ถนนสุขุมวิท", "กรุงเทพมหานคร 10110", "โทร. 02 123 4567"),
    ),
    SignSpec(
        "tokyo",
        "JP",
        35.6895,
        139.6917,
        ("喫茶 さくら", "東京都渋谷区神南1-2-3", "〒150-0041", "TEL 03-3464-1234"),
    ),
    SignSpec(
        "osaka", "JP", 34.6937, 135.5022, ("たこ焼き 大阪屋", "大阪市中央区道頓堀1丁目", "06-6211-1234")
    ),
    SignSpec(
        "seoul", "KR", 37.5660, 126.9784, ("서울 카페", "서울특별시 종로구 세종대로 175", "02-734-1234")
    ),
    SignSpec("busan", "KR", 35.1028, 129.0403, ("해운대 횟집", "부산광역시 해운대구", "051-746-1234")),
    SignSpec(
        "athens", "GR", 37.9838, 23.7278, ("ΦΟΥΡΝΟΣ", "Οδός Ερμού 15", "105 63 Αθήνα", "Τηλ. 210 323 4567")
    ),
    SignSpec("thessaloniki", "GR", 40.6403, 22.9439, ("ΖΑΧΑΡΟΠΛΑΣΤΕΙΟ", "Θεσσαλονίκη", "Τηλ. 2310 234567")),
    SignSpec(
        "moscow", "RU", 55.7522, 37.6156, ("Кафе Пушкин", "ул. Тверская 10", "Москва", "+7 495 123-45-67")
    ),
    SignSpec(
        "saint_petersburg",
        "RU",
        59.9386,
        30.3141,
        ("Булочная", "Невский пр-т 28", "Санкт-Петербург", "+7 812 312-45-67"),
    ),
    SignSpec("kyiv", "UA", 50.4547, 30.5238, ("Кав'ярня", "вул. Хрещатик 22", "Київ", "+380 44 234 5678")),
    SignSpec("tbilisi", "GE", 41.6941, 44.8337, ("კაფე", "თბილისი", "+995 32 212 3456")),
    SignSpec("yerevan", "AM", 40.1811, 44.5136, ("Սրճարան", "Երևան", "+374 10 523456")),
    SignSpec("tel_aviv", "IL", 32.0809, 34.7806, ("בית קפה", "תל אביב", "03-523-4567")),
    SignSpec("cairo", "EG", 30.0626, 31.2497, ("مقهى الفيشاوي", "القاهرة", "+20 2 2590 6789")),
    SignSpec("delhi", "IN", 28.6519, 77.2315, ("चाय की दुकान", "नई दिल्ली", "+91 11 2345 6789")),
    SignSpec("kolkata", "IN", 22.5626, 88.3630, ("মিষ্টির দোকান", "কলকাতা", "+91 33 2234 5678")),
    SignSpec("beijing", "CN", 39.9075, 116.3972, ("北京烤鸭店", "北京市朝阳区建国路88号", "010-6512-3456")),
    SignSpec(
        "shanghai", "CN", 31.2222, 121.4581, ("上海小笼包", "上海市黄浦区南京东路100号", "021-6321-1234")
    ),
    SignSpec("taipei", "TW", 25.0478, 121.5319, ("台北牛肉麵", "台北市中正區重慶南路", "02-2345-6789")),
    SignSpec(
        "paris",
        "FR",
        48.8534,
        2.3488,
        ("Boulangerie Dupont", "12 Rue de Rivoli", "75004 Paris", "01 42 34 56 78"),
    ),
    SignSpec(
        "lyon", "FR", 45.7485, 4.8467, ("Bouchon Lyonnais", "Rue Mercière", "69002 Lyon", "04 78 42 34 56")
    ),
    SignSpec(
        "berlin",
        "DE",
        52.5244,
        13.4105,
        ("Bäckerei Schmidt", "Friedrichstraße 12", "10117 Berlin", "Tel. 030 2345678"),
    ),
    SignSpec(
        "munich",
        "DE",
        48.1374,
        11.5755,
        ("Metzgerei Huber", "Sendlinger Straße 5", "80331 München", "Tel. 089 2345678"),
    ),
    SignSpec(
        "vienna",
        "AT",
        48.2085,
        16.3721,
        ("Kaffeehaus Central", "Herrengasse 14", "1010 Wien", "+43 1 533 3764"),
    ),
    SignSpec(
        "madrid", "ES", 40.4165, -3.7026, ("Panadería", "Calle Mayor 10", "28013 Madrid", "Tel. 915 123 456")
    ),
    SignSpec(
        "lisbon",
        "PT",
        38.7167,
        -9.1333,
        ("Pastelaria", "Rua Augusta 100", "1100-053 Lisboa", "Tel. 213 123 456"),
    ),
    SignSpec(
        "rome",
        "IT",
        41.8919,
        12.5113,
        ("Forno Campo de' Fiori", "Via del Corso 12", "00186 Roma", "Tel. 06 6880 1234"),
    ),
    SignSpec(
        "amsterdam", "NL", 52.3740, 4.8897, ("Bakkerij", "Damrak 1", "1012 LG Amsterdam", "020 623 4567")
    ),
    SignSpec(
        "warsaw",
        "PL",
        52.2298,
        21.0118,
        ("Piekarnia", "ul. Marszałkowska 10", "00-590 Warszawa", "+48 22 621 2345"),
    ),
    SignSpec(
        "prague", "CZ", 50.0880, 14.4208, ("Pekárna", "Národní 10", "110 00 Praha 1", "+420 224 123 456")
    ),
    SignSpec(
        "new_york",
        "US",
        40.7143,
        -74.0060,
        ("Joe's Pizza", "7 Carmine St", "New York, NY 10014", "(212) 366-1182"),
    ),
    SignSpec(
        "seattle",
        "US",
        47.6062,
        -122.3321,
        ("Pike Coffee", "1912 Pike Pl", "Seattle, WA 98101", "(206) 624-1234"),
    ),
    SignSpec(
        "sao_paulo",
        "BR",
        -23.5475,
        -46.6361,
        ("Padaria", "Av. Paulista 1000", "São Paulo - SP", "CEP 01310-100"),
    ),
    SignSpec(
        "sydney", "AU", -33.8679, 151.2073, ("Harbour Cafe", "George St", "Sydney NSW 2000", "(02) 9251 1234")
    ),
    SignSpec(
        "istanbul",
        "TR",
        41.0138,
        28.9497,
        ("Fırın", "İstiklal Caddesi 12", "Beyoğlu İstanbul", "0212 245 1234"),
    ),
    SignSpec("hanoi", "VN", 21.0245, 105.8412, ("Phở Hà Nội", "Phố Hàng Bạc", "Hà Nội", "024 3826 1234")),
    SignSpec("phnom_penh", "KH", 11.5625, 104.9160, ("ហាងកាហ្វេ", "ភ្នំពេញ", "+855 23 212 345")),
    SignSpec("colombo", "LK", 6.9319, 79.8478, ("තේ කඩය", "කොළඹ", "+94 11 234 5678")),
    SignSpec("addis_ababa", "ET", 9.0250, 38.7469, ("ቡና ቤት", "አዲስ አበባ", "+251 11 551 2345")),
    # only a script or a language: a country at best
    SignSpec("greek_bakery", "GR", 37.9838, 23.7278, ("ΑΡΤΟΠΟΙΕΙΟ",)),
    SignSpec("korean_shop", "KR", 37.5660, 126.9784, ("김밥 천국",)),
    SignSpec("thai_noodles", "TH", 13.7540, 100.5014, ("ก๋วยเตี๋ยว",)),
    SignSpec("georgian_bakery", "GE", 41.6941, 44.8337, ("პურის საცხობი",)),
    SignSpec("german_bakery", "DE", 52.5244, 13.4105, ("Bäckerei", "Frische Brötchen")),
    # a name shared by several places, or a language spoken in several countries: often wrong
    SignSpec("cordoba_spain", "ES", 37.8916, -4.7727, ("Panadería", "Córdoba")),
    SignSpec("cordoba_argentina", "AR", -31.4135, -64.1811, ("Panadería", "Córdoba")),
    SignSpec("valencia_venezuela", "VE", 10.1620, -68.0077, ("Farmacia", "Valencia")),
    SignSpec("san_jose_costa_rica", "CR", 9.9333, -84.0833, ("Soda Tica", "San José")),
    SignSpec("hamilton_new_zealand", "NZ", -37.7833, 175.2833, ("Bakery", "Hamilton")),
    SignSpec("springfield_illinois", "US", 39.8017, -89.6437, ("Hardware", "Springfield")),
    SignSpec("frankfurt_oder", "DE", 52.3471, 14.5506, ("Bäckerei", "Frankfurt (Oder)")),
    SignSpec("santiago_compostela", "ES", 42.8805, -8.5457, ("Café", "Santiago")),
    SignSpec("quebec_boulangerie", "CA", 46.8123, -71.2145, ("Boulangerie", "Rue Saint-Jean")),
    SignSpec("graz_apotheke", "AT", 47.0667, 15.4500, ("Apotheke",)),
    SignSpec("porto_farmacia", "PT", 41.1496, -8.6110, ("Farmácia",)),
    SignSpec("tokyo_starbucks", "JP", 35.6895, 139.6917, ("Starbucks Coffee",)),
    SignSpec("london_ontario", "CA", 42.9834, -81.2330, ("Fish & Chips", "London")),
    SignSpec("paris_texas", "US", 33.6609, -95.5555, ("Diner", "Paris")),
    SignSpec("birmingham", "GB", 52.4814, -1.8998, ("Chippy", "Birmingham")),
    SignSpec("perth", "AU", -31.9522, 115.8614, ("Cafe", "Perth")),
)


def _font_for(char: str) -> str:
    """The font file that draws one character (Latin, Greek, Cyrillic and digits: Noto Sans)."""
    import unicodedata

    if 0x3000 <= ord(char) <= 0x30FF or 0xFF00 <= ord(char) <= 0xFFEF:  # 〒, 「」, full-width forms
        return SCRIPT_FONTS["CJK"]
    name = unicodedata.name(char, "")
    for prefix, font in SCRIPT_FONTS.items():
        if name.startswith(prefix):
            return font
    return LATIN_FONT


def _runs(text: str) -> list[tuple[str, str]]:
    """The text split where its font changes; spaces and marks stay with the run before them."""
    import unicodedata

    runs: list[tuple[str, str]] = []
    for char in text:
        keep = char.isspace() or unicodedata.category(char).startswith("M") or char in "-–.,'/()"
        font = runs[-1][1] if keep and runs else _font_for(char)
        if runs and runs[-1][1] == font:
            runs[-1] = (runs[-1][0] + char, font)
        else:
            runs.append((char, font))
    return runs


def _font(font: str, px: int) -> ImageFont.FreeTypeFont:
    """The font file at ``px``; without Noto Sans installed, Pillow's own font draws Latin text."""
    path = FONT_DIR / font
    if path.is_file():
        return ImageFont.truetype(str(path), px)
    if font == LATIN_FONT:
        return ImageFont.load_default(size=px)  # type: ignore[return-value]
    raise FileNotFoundError(
        f"{path} is missing: install fonts-noto-core and fonts-wqy-microhei to draw this script"
    )


def render_sign(lines: tuple[str, ...], path: Path, size: tuple[int, int] = (1280, 860)) -> Path:
    """A shop sign with each line centred, every script in its own font; saved as PNG."""
    width, height = size
    img = Image.new("RGB", size, (196, 186, 170))
    draw = ImageDraw.Draw(img)
    draw.rectangle([60, 80, width - 60, height - 80], fill=(24, 60, 96), outline=(220, 200, 140), width=8)
    step = (height - 240) / max(len(lines), 1)
    for i, line in enumerate(lines):
        px = 84 if i == 0 else 56
        runs = [(text, _font(font, px)) for text, font in _runs(line)]
        total = sum(draw.textlength(text, font=f) for text, f in runs)
        x, y = (width - total) / 2, 120 + step * (i + 0.5)
        for text, f in runs:
            draw.text((x, y), text, font=f, fill=(250, 244, 225), anchor="lm")
            x += draw.textlength(text, font=f)
    img.save(path, format="PNG", optimize=True)
    return path


def render_set(folder: Path) -> list[tuple[SignSpec, Path]]:
    """Every sign of `SIGN_SET` as ``folder/NAME.png``."""
    folder.mkdir(parents=True, exist_ok=True)
    return [(spec, render_sign(spec.lines, folder / f"{spec.name}.png")) for spec in SIGN_SET]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, help="render the whole sign set into this folder")
    args = parser.parse_args()
    if args.set:
        for _, path in render_set(args.set):
            print(path)
    else:
        print(make_sign())
