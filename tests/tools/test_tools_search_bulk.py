"""The offline search index reads the gazetteer in bulk and gets the same documents as per-place reads."""

from __future__ import annotations

from collections import Counter

import numpy as np

from geosleuth.gazetteer import get_gazetteer
from geosleuth.tools.providers.search_offline import _gazetteer_documents, place_document


def test_iter_rows_covers_every_place_of_a_kind() -> None:
    gaz = get_gazetteer()
    kinds = Counter(row[7] for row in gaz.iter_rows(kind=None))
    assert sum(kinds.values()) == len(gaz.lat)
    assert kinds["city"] == int(np.sum(gaz.kind == "city")) > 100_000
    countries = list(gaz.iter_rows(kind="country"))
    assert len(countries) == kinds["country"] and all(r[0].startswith("country:") for r in countries)
    ch = next(r for r in countries if r[0] == "country:CH")
    assert ch[4] == "CH" and 45.5 < ch[2] < 48 and 5.5 < ch[3] < 10.5


def test_bulk_documents_equal_per_place_documents() -> None:
    gaz = get_gazetteer()
    sample = gaz.places_in_bbox(45.8, 5.9, 47.8, 10.5, limit=400)  # Switzerland and its neighbours
    sample += gaz.places_in_bbox(35.0, 139.0, 36.5, 140.5, limit=100)  # Tokyo area: non-Latin admin names
    expected = {place_document(p) for p in sample}
    urls = {e[2] for e in expected}
    bulk = {doc for doc in _gazetteer_documents() if doc[2] in urls}
    assert bulk == expected
    zurich = next(d for d in bulk if d[0] == "Zürich")
    assert "Switzerland" in zurich[1] and "Population" in zurich[1] and zurich[3] > 5
