"""libpostal's parser on sign text (the ``address`` extra): the data wheels assemble into its data
directory, and the lines a sign prints parse into the components a geocoder needs, in several
countries' formats. Expected components are written by hand from each country's address format."""

from __future__ import annotations

import pytest

pytest.importorskip("postal")

from geosleuth.agent.street import parsed_query  # noqa: E402
from geosleuth.gazetteer import libpostal  # noqa: E402
from geosleuth.gazetteer.libpostal import AddressParts, components  # noqa: E402

pytestmark = pytest.mark.skipif(
    not libpostal.installed(), reason="the address extra's data wheels are absent"
)

SIGNS = [
    # Swiss: street then number, postcode before the town
    ("Konditorei Frey\nHertensteinstrasse 12\n6004 Luzern\nTel. +41 41 410 23 45", "Luzern",
     AddressParts("12", "hertensteinstrasse", "6004", "luzern"), "Hertensteinstrasse 12, 6004 Luzern"),
    # French: number before the street
    ("BOULANGERIE DUPONT\n12 Rue de Rivoli\n75004 Paris", "Paris",
     AddressParts("12", "rue de rivoli", "75004", "paris"), "12 Rue de Rivoli, 75004 Paris"),
    # British: town then the outward and inward postcode
    ("The Crown\n221B Baker Street\nLondon NW1 6XE", "London",
     AddressParts("221b", "baker street", "nw1 6xe", "london"), "221B Baker Street, London NW1 6XE"),
    # US: town, state, ZIP on one line
    ("Joe's Diner\n350 Fifth Avenue\nNew York, NY 10118", "New York",
     AddressParts("350", "fifth avenue", "10118", "new york", "ny"), "350 Fifth Avenue, New York 10118"),
    # Italian: the shop's name is the town's; the town is read after the street
    ("Pizzeria Roma\nVia del Corso 12\n00186 Roma", "Roma",
     AddressParts("12", "via del corso", "00186", "roma"), "Via del Corso 12, 00186 Roma"),
    # Polish: hyphenated postcode, non-ASCII letters kept as written
    ("Piekarnia\nul. Marszałkowska 10\n00-590 Warszawa", "Warszawa",
     AddressParts("10", "marszałkowska", "00-590", "warszawa"), "Marszałkowska 10, 00-590 Warszawa"),
    # Spanish
    ("Bar España\nCalle de Alcalá 42\n28014 Madrid", "Madrid",
     AddressParts("42", "calle de alcalá", "28014", "madrid"), "Calle de Alcalá 42, 28014 Madrid"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("text", "place", "parts", "query"), SIGNS)
def test_sign_lines_parse_into_their_components(
    text: str, place: str, parts: AddressParts, query: str
) -> None:
    parsed = libpostal.parse_address(text)
    assert parsed == parts
    assert parsed_query(parsed, text, place) == query


@pytest.mark.slow
def test_a_sign_without_a_street_or_naming_another_town_gives_no_query() -> None:
    parsed = libpostal.parse_address("Konditorei Frey\n6004 Luzern")
    assert parsed is not None and parsed.road is None and parsed.postcode == "6004"
    assert parsed_query(parsed, "Konditorei Frey\n6004 Luzern", "Luzern") is None
    bern = libpostal.parse_address("Marktgasse 5\n3011 Bern")
    assert bern is not None and parsed_query(bern, "Marktgasse 5\n3011 Bern", "Luzern") is None


@pytest.mark.slow
def test_the_assembled_directory_has_libpostal_layout_and_declared_sizes() -> None:
    root = libpostal.ensure_data()
    assert (root / "DONE").read_text() == libpostal.data_fingerprint()
    for name, folder in libpostal.LAYOUT.items():
        assert (root / folder / name).stat().st_size > 0
    # address_finder_data_p00 declares FILE_ORIGINAL_SIZE = 1014429504 for the CRF model
    assert (root / "address_parser" / "address_parser_crf.dat").stat().st_size == 1014429504
    assert libpostal.parser_name().startswith("libpostal (pypostal-multiarch ")


def test_components_keep_the_first_value_of_each_label() -> None:
    labelled = [("12", "house_number"), ("hertensteinstrasse", "road"), ("luzern", "city"), ("bern", "city")]
    assert components(labelled) == AddressParts(house_number="12", road="hertensteinstrasse", city="luzern")
