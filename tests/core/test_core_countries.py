"""Country resolution from names in many languages, and country facts."""

import pytest

from geosleuth.core.countries import country_info, country_name, resolve_country, same_country
from geosleuth.core.text import normalize, script_of, similarity


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("USA", "US"), ("United States of America", "US"), ("United States", "US"), ("U.S.A.", "US"),
        ("Deutschland", "DE"), ("中国", "CN"), ("Россия", "RU"), ("日本", "JP"), ("Schweiz", "CH"),
        ("Suisse", "CH"), ("Brasil", "BR"), ("México", "MX"), ("UK", "GB"), ("England", "GB"),
        ("Côte d’Ivoire", "CI"), ("the Netherlands", "NL"), ("Holland", "NL"), ("DEU", "DE"), ("FR", "FR"),
        ("Paris, France", "FR"), ("Kosovo", "XK"), ("대한민국", "KR"), ("Türkiye", "TR"), ("España", "ES"),
    ],
)  # fmt: skip
def test_resolve_country(text, code):
    assert resolve_country(text) == code


@pytest.mark.parametrize("text", ["", None, "nonsense", "Atlantis", "12"])
def test_unknown_country_is_none(text):
    assert resolve_country(text) is None


def test_same_country_and_names():
    assert same_country("USA", "United States")
    assert not same_country("USA", "Atlantis")
    assert country_name("DE", "de") == "Deutschland"


def test_country_info_facts():
    fr = country_info("FR")
    assert fr is not None
    assert fr.continent == "Europe" and fr.subregion == "Western Europe"
    assert "DE" in fr.neighbours and fr.phone == "33" and fr.currency == "EUR"
    assert country_info("Deutschland").code == "DE"  # type: ignore[union-attr]
    assert country_info("Atlantis") is None
    assert country_info("UK").code == "GB"  # type: ignore[union-attr]  # an alias, not an ISO code


def test_normalize_folds_accents_case_and_punctuation():
    assert normalize("Zürich") == normalize("ZURICH") == "zurich"
    assert normalize("São Paulo") == normalize("Sao-Paulo") == "sao paulo"
    assert normalize("Straße") == "strasse"
    assert normalize("Москва") == "москва"


def test_similarity_and_script():
    assert similarity("New York City", "new york") >= 0.8
    assert similarity("Paris", "Lyon") == 0.0
    assert similarity(None, "x") == 0.0
    assert script_of("東京タワー") in {"Han", "Katakana"}
    assert script_of("Москва") == "Cyrillic"


def test_republic_of_china_is_taiwan_not_the_prc():
    assert resolve_country("Republic of China") == "TW"
    assert resolve_country("People's Republic of China") == "CN"
    assert resolve_country("Hong Kong SAR") == "HK" and resolve_country("Bosnia") == "BA"


@pytest.mark.parametrize(
    ("text", "code"),
    [("Ý", "IT"), ("ý", "IT"), ("Áo", "AT"), ("Úc", "AU"), ("Bỉ", "BE"), ("Roma, Ý", "IT"), ("uk", "GB"),
     ("US", "US"), ("チリ", "CL"), ("中国", "CN"), ("タイ", "TH")],
)  # fmt: skip
def test_short_names_match_as_written(text, code):
    """Vietnamese CLDR names of one or two letters (Ý = Italy, Áo = Austria, Úc = Australia,
    Bỉ = Belgium) resolve with their accents; CJK names of two characters are unaffected."""
    assert resolve_country(text) == code


@pytest.mark.parametrize("text", ["y", "Y", "ao", "Ao", "uc", "bi", "Bi", "Roma, y", "Ao."])
def test_short_names_do_not_match_through_accent_folding(text):
    assert resolve_country(text) is None


def test_no_short_name_in_the_tables_resolves_without_its_accents():
    from geosleuth.core.countries import SHORT_NAME_CHARS, name_index

    for key in name_index():
        folded = normalize(key)
        if len(folded) <= SHORT_NAME_CHARS and folded != key:
            assert resolve_country(folded) is None, (key, folded)
