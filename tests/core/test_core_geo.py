"""Distances and datum conversions against independent references."""

import numpy as np
import pytest
from geographiclib.geodesic import Geodesic

from geosleuth.core import geo


def test_haversine_known_distance_and_default_radius():
    # One degree of longitude on the equator with the mean Earth radius.
    assert geo.haversine_km(0, 0, 0, 1) == pytest.approx(2 * np.pi * 6371.0088 / 360)
    assert geo.haversine_km(0, 0, 0, 1, radius_km=6371.0) == pytest.approx(2 * np.pi * 6371.0 / 360)


def test_identical_points_poles_and_antimeridian():
    assert geo.haversine_km(12.5, 45.0, 12.5, 45.0) == 0.0
    assert geo.haversine_km(90, 0, 90, 123) == pytest.approx(0.0, abs=1e-9)
    assert geo.haversine_km(90, 0, -90, 0) == pytest.approx(np.pi * 6371.0088)
    # Across the antimeridian the short way round is 2 degrees, not 358.
    assert geo.haversine_km(0, 179, 0, -179) == pytest.approx(geo.haversine_km(0, 0, 0, 2))
    assert geo.geodesic_km(0, 179, 0, -179) == pytest.approx(222.639, rel=1e-4)


def test_nan_propagates_and_vectorised_shapes():
    d = geo.haversine_km([0, np.nan], [0, 0], [0, 0], [1, 1])
    assert d.shape == (2,) and np.isfinite(d[0]) and np.isnan(d[1])
    g = geo.geodesic_km([0, np.nan], [0, 0], [0, 0], [1, 1])
    assert np.isnan(g[1]) and g[0] == pytest.approx(111.319, rel=1e-4)


def test_geodesic_matches_geographiclib():
    """Large batches (PROJ) against Karney's own implementation, pair by pair."""
    rng = np.random.default_rng(0)
    n = geo.SMALL_GEODESIC_BATCH + 300
    lat1, lat2 = rng.uniform(-89, 89, (2, n))
    lon1, lon2 = rng.uniform(-180, 180, (2, n))
    ours = geo.geodesic_km(lat1, lon1, lat2, lon2)
    ref = [
        Geodesic.WGS84.Inverse(a, b, c, d)["s12"] / 1000
        for a, b, c, d in zip(lat1, lon1, lat2, lon2, strict=True)
    ]
    np.testing.assert_allclose(ours, ref, rtol=1e-9, atol=1e-6)


def test_small_and_large_geodesic_batches_agree_to_the_micrometre():
    """A small batch takes geographiclib, a large one PROJ: the same pairs get the same distance
    either way, including the hard cases (nearly antipodal, poles, antimeridian, identical)."""
    rng = np.random.default_rng(1)
    hard = np.array(
        [
            [0, 0, 0.5, 179.7],
            [89.999, 10, -89.999, -170],
            [0, 179.9, 0, -179.9],
            [45, 7, 45, 7],
            [90, 0, -90, 0],
        ]
    )
    pairs = np.vstack([hard, rng.uniform([-90, -180] * 2, [90, 180] * 2, (200, 4))])
    padded = np.vstack([pairs, np.zeros((geo.SMALL_GEODESIC_BATCH, 4))])  # forces the PROJ path
    small = geo.geodesic_km(*pairs.T)
    large = geo.geodesic_km(*padded.T)[: len(pairs)]
    assert len(pairs) <= geo.SMALL_GEODESIC_BATCH < len(padded)
    np.testing.assert_allclose(small, large, rtol=0, atol=1e-9)  # km: a micrometre


def test_cosines_and_dispatch():
    assert geo.distance_km(10, 10, 11, 11, method="cosines", radius_km=6371.0) == pytest.approx(
        geo.haversine_km(10, 10, 11, 11, radius_km=6371.0), rel=1e-6
    )
    with pytest.raises(ValueError, match="unknown distance method"):
        geo.distance_km(0, 0, 1, 1, method="manhattan")  # type: ignore[arg-type]


def test_valid_coordinates():
    ok = geo.valid_coordinates([0, 91, -90, np.nan, 10], [0, 0, 180, 0, 181])
    assert ok.tolist() == [True, False, True, False, False]


def test_gcj02_matches_reference_in_beijing():
    # Reference output of the widely used coordtransform implementation for Tiananmen.
    lat, lon = geo.wgs84_to_gcj02(39.915, 116.404)
    assert float(geo.haversine_km(lat, lon, 39.91640428150164, 116.41024449916938)) * 1000 < 0.01
    wlat, wlon = geo.gcj02_to_wgs84(39.915, 116.404)
    assert float(geo.haversine_km(wlat, wlon, 39.91359571849836, 116.39775550083061)) * 1000 < 1.0


def test_gcj02_round_trip_under_a_metre():
    rng = np.random.default_rng(1)
    lat, lon = rng.uniform(20, 45, 1000), rng.uniform(100, 125, 1000)
    back = geo.gcj02_to_wgs84(*geo.wgs84_to_gcj02(lat, lon))
    assert float(np.max(geo.haversine_km(lat, lon, *back))) * 1000 < 1.0
    bd = geo.bd09_to_wgs84(*geo.wgs84_to_bd09(lat, lon))
    assert float(np.max(geo.haversine_km(lat, lon, *bd))) * 1000 < 1.0


def test_bd09_reference_and_outside_china_unchanged():
    lat, lon = geo.gcj02_to_bd09(39.915, 116.404)
    assert (float(lat), float(lon)) == pytest.approx((39.92133699351022, 116.41036949371029), abs=1e-9)
    lat, lon = geo.bd09_to_gcj02(39.915, 116.404)
    assert (float(lat), float(lon)) == pytest.approx((39.90865673957631, 116.39762729119315), abs=1e-9)
    for f in (geo.wgs84_to_gcj02, geo.gcj02_to_wgs84):
        assert tuple(map(float, f(48.8566, 2.3522))) == (48.8566, 2.3522)


def test_destination_inverts_distance():
    lat, lon = geo.destination(47.0, 8.0, 90.0, 100.0)
    assert geo.haversine_km(47.0, 8.0, lat, lon) == pytest.approx(100.0, rel=1e-9)
