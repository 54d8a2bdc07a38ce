"""The search leak guard (issue 42): what each mode drops, distances worked out by hand, the POI
tools screened after the cache, and bounded, exception-free screening of any tool text."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from geosleuth.core.parsing.coordinates import coordinate_pairs
from geosleuth.testing import cpu_seconds
from geosleuth.tools import build_registry
from geosleuth.tools.config import ToolSettings
from geosleuth.tools.leakguard import GuardSpec, guarding, sample_needles

TRUTH = (48.8584, 2.2945)  # the Eiffel Tower
FLICKR = ("flickr.com", "flic.kr")


def guard(mode: str = "hosts"):  # type: ignore[no-untyped-def]
    needles = sample_needles("eiffel-0042", "/data/im2gps3k/2940211474_8c0f3a9e1b_o.jpg")
    return GuardSpec(mode, FLICKR, needles, TRUTH).start()  # type: ignore[arg-type]


def test_needles_are_the_id_the_file_name_and_its_long_numbers() -> None:
    assert sample_needles("eiffel-0042", "/d/2940211474_8c0f3a9e1b_o.jpg") == (
        "2940211474", "2940211474_8c0f3a9e1b_o", "2940211474_8c0f3a9e1b_o.jpg", "eiffel-0042",
    )  # fmt: skip
    assert sample_needles("42", "/d/42.jpg") == ("42.jpg",)  # "42" alone would match any page


@pytest.mark.parametrize(
    ("url", "text", "dropped"),
    [
        ("https://www.flickr.com/photos/jdoe/1/", "", True),
        ("https://m.flickr.com/x", "", True),  # a subdomain of a source host
        ("https://flic.kr/p/abc", "", True),
        ("https://notflickr.com/a", "", False),  # only the host itself and its subdomains
        ("https://flickr.com.example.net/a", "", False),
        ("https://mirror.example/2940211474_8c0f3a9e1b_o.jpg", "", True),  # the file name
        ("https://example.org/a", "Photo 2940211474 by jdoe", True),  # the Flickr photo id
        ("https://example.org/a", "Photo 29402114745", False),  # a longer number is another one
        ("https://example.org/a", "sample EIFFEL-0042 leaked", True),  # case-insensitive
        ("https://example.org/a", "Tower at 48.8584, 2.2945", False),  # hosts mode reads no coordinates
    ],
)
def test_hosts_mode(url: str, text: str, dropped: bool) -> None:
    assert guard().leaks(url, text) is dropped


@pytest.mark.parametrize(
    ("text", "dropped"),
    [
        # 0.00014° of latitude is 0.00014 × 111.2 km = 15.6 m: within 1 km
        ("Coordinates: 48.85826, 2.29451", True),
        # 0.01° of longitude at 48.8584° N is 0.01 × 111.19 km × cos(48.8584°) = 0.01 × 111.19 × 0.658
        # = 0.732 km: within 1 km
        ("48.8584, 2.3045", True),
        # 0.02° of longitude there is 1.46 km: beyond
        ("48.8584, 2.3145", False),
        ("lat=48.8584 lon=2.2945", True),
        ("2.2945, 48.8584", True),  # written longitude first
        ("48°51′30″N 2°17′40″E", True),  # 48.85833, 2.29444: 7 m
        ("Paris is nice in May 2019, 12 photos", False),
    ],
)
def test_strict_mode_drops_coordinates_within_one_km(text: str, dropped: bool) -> None:
    assert guard("strict").leaks("https://example.org/", text) is dropped


def test_the_truth_is_not_shown_to_the_guards_caller() -> None:
    spec = GuardSpec("strict", FLICKR, ("eiffel-0042",), TRUTH)
    screen = spec.start()
    shown = repr(spec) + repr(screen) + repr(vars(screen))
    assert "48.8584" not in shown and "2.2945" not in shown
    assert GuardSpec("hosts", FLICKR, (), TRUTH).start().leaks(None, "48.8584, 2.2945") is False


def test_keep_counts_what_it_drops() -> None:
    screen = guard()
    kept = screen.keep(["https://flickr.com/a", "https://example.org/b"], lambda u: (u, ""))
    assert kept == ["https://example.org/b"] and screen.blocked == 1
    off = GuardSpec("off", FLICKR, ("eiffel-0042",)).start()
    assert (
        off.keep(["https://flickr.com/a"], lambda u: (u, "")) == ["https://flickr.com/a"] and off.blocked == 0
    )


async def test_poi_results_are_screened_after_the_cache(tmp_path: Path) -> None:
    pois = tmp_path / "pois.csv"
    pois.write_text(
        "id,name,lat,lon,category,address\n"
        "1,Tour Eiffel,48.8583,2.2944,attraction,Champ de Mars Paris\n"
        "2,Café de Flore,48.8540,2.3325,cafe,172 Bd Saint-Germain Paris\n",
        encoding="utf-8",
    )
    reg = build_registry(
        ToolSettings(cache={"path": tmp_path / "c.sqlite", "cache_offline": True}, poi_files=[pois])
    )
    args = {"query": "Paris", "near_lat": 48.85, "near_lon": 2.3}
    with guarding(guard("strict")) as screen:
        found = await reg.call("poi_keyword_search", args)
        detail = await reg.call("poi_detail_query", {"poi_id": "poi:pois:1"})
    names = [p["name"] for p in found.data]
    assert "Café de Flore" in names and "Tour Eiffel" not in names and "Tour Eiffel" not in found.text
    assert not detail.ok and "no POI with id" in detail.error  # as if unknown: no trace of the drop
    assert screen is not None and screen.blocked == 2
    unguarded = await reg.call("poi_keyword_search", args)  # the same search, from the cache
    assert unguarded.cache_hit and {"Tour Eiffel", "Café de Flore"} <= {p["name"] for p in unguarded.data}


@given(st.text(max_size=300), st.text(max_size=120))
def test_screening_any_text_never_raises(text: str, url: str) -> None:
    guard("strict").leaks(url, text)
    for _, lat, lon in coordinate_pairs(text, any_pair=True):
        assert math.isfinite(lat) and math.isfinite(lon) and abs(lat) <= 180 and abs(lon) <= 180


@pytest.mark.parametrize("unit", ["lat lat lon ", "1.5, ", "lat=1.5 lon=x ", "N 48.8584 E 2.2945 "])
def test_screening_runs_in_linear_time(unit: str) -> None:
    """Ten times the text costs about ten times the CPU, not a hundred (a result's text is untrusted)."""
    small, big = unit * 500, unit * 5000
    screen = guard("strict")
    _, t_small = cpu_seconds(screen.leaks, "https://example.org", small)
    _, t_big = cpu_seconds(screen.leaks, "https://example.org", big)
    assert t_big < 40 * max(t_small, 1e-3)
