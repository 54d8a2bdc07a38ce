"""Offline map: country names, readable place labels, and coastlines drawn apart from land borders."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from geosleuth.tools.providers.maps_offline import STYLES, MapLabel, OfflineMapProvider

STATIC = STYLES["static"]


@pytest.fixture(scope="module")
def maps() -> OfflineMapProvider:
    return OfflineMapProvider(640, 640)


def _count(image: object, colour: tuple[int, int, int], box: tuple[float, ...] | None = None) -> int:
    pixels = np.asarray(image)
    if box is not None:
        x0, y0, x1, y1 = (int(round(v)) for v in box)
        pixels = pixels[y0:y1, x0:x1]
    return int(np.all(pixels == colour, axis=-1).sum())


def _assert_readable(labels: list[MapLabel], size: int = 640) -> None:
    """Every label inside the image, clear of the others and of the marker at the centre."""
    marker = (size / 2 - 12, size / 2 - 12, size / 2 + 12, size / 2 + 12)
    for a in labels:
        assert min(a.box[0], a.box[1]) >= 0 and max(a.box[2], a.box[3]) <= size, a
        assert not _overlap(a.box, marker), a
    for a, b in itertools.combinations(labels, 2):
        assert not _overlap(a.box, b.box), (a, b)


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return not (a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1])


def test_zurich_names_its_country_and_neighbour(maps: OfflineMapProvider) -> None:
    image, labels = maps.draw_labelled(47.3769, 8.5417, 10)
    countries = {lb.text: lb for lb in labels if lb.kind == "country"}
    places = [lb.text for lb in labels if lb.kind == "place"]
    assert {"SWITZERLAND", "GERMANY"} <= set(countries)
    assert "Zürich" in places  # the city under the marker still gets its name
    assert not any(p.startswith("Zürich (") for p in places)  # districts do not repeat it
    assert len(places) >= 20
    _assert_readable(labels)
    assert _count(image, STATIC["country"], countries["SWITZERLAND"].box) > 60  # the name is drawn


def test_world_view_labels_large_countries(maps: OfflineMapProvider) -> None:
    image, labels = maps.draw_labelled(20.0, 0.0, 1)
    countries = {lb.text for lb in labels if lb.kind == "country"}
    assert {"UNITED STATES", "RUSSIA", "BRAZIL", "CANADA", "CHINA"} <= countries
    assert len(countries) <= 20  # only where the name fits inside the country
    _assert_readable(labels)


def test_enclave_is_land_and_named(maps: OfflineMapProvider) -> None:
    image, labels = maps.draw_labelled(-29.6, 28.2, 6)  # Lesotho, inside South Africa
    assert image.getpixel((300, 300)) == STATIC["land"]
    assert {"LESOTHO", "SOUTH AFRICA"} <= {lb.text for lb in labels if lb.kind == "country"}


@pytest.mark.parametrize(
    ("lat", "lon", "zoom", "coast", "border"),
    [
        (47.3769, 8.5417, 7, False, True),  # landlocked: borders, no coastline
        (1.3521, 103.8198, 10, True, False),  # Singapore: its border with Malaysia runs through water
        (48.0, 10.0, 4, True, True),
    ],
)
def test_coastlines_and_land_borders_differ(
    maps: OfflineMapProvider, lat: float, lon: float, zoom: int, coast: bool, border: bool
) -> None:
    image, _ = maps.draw_labelled(lat, lon, zoom)
    below_legend = (0, 60, 640, 640)
    n_coast = _count(image, STATIC["coast"], below_legend)
    n_border = _count(image, STATIC["border"], below_legend)
    assert (n_coast > 1000) == coast, n_coast
    assert (n_border > 1000) == border, n_border
    assert (n_coast < 100) == (not coast) and (n_border < 100) == (not border)


def test_satellite_variant_keeps_labels_and_key(maps: OfflineMapProvider) -> None:
    image, labels = maps.draw_labelled(48.0, 10.0, 4, "satellite")
    assert "GERMANY" in {lb.text for lb in labels}
    sat = STYLES["satellite"]
    assert _count(image, sat["coast"]) > 1000 and _count(image, sat["border"]) > 1000
    assert _count(image, sat["country"]) > 200


@pytest.mark.parametrize("lon", [179.5, -179.5])
def test_land_on_both_sides_of_the_antimeridian(maps: OfflineMapProvider, lon: float) -> None:
    """Chukotka spans the date line at 66° N: both halves of a zoom-5 view must show land."""
    image = np.asarray(maps.draw(66.0, lon, 5))
    sea = np.all(image == STATIC["water"], axis=-1)
    assert (~sea[100:540, :300]).mean() > 0.1
    assert (~sea[100:540, 340:]).mean() > 0.1
