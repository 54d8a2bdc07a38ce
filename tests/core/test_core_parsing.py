"""Answer parsing: every published format, strict vs robust, and strings that must not crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geosleuth.core.parsing import parse_answer, parse_coordinate_text
from geosleuth.core.records import ParseStatus, Place

FIXTURES = Path(__file__).resolve().parents[1] / "data"  # slices of ../shared/fixtures


def test_twm_json_with_trailing_text_and_fence() -> None:
    text = 'Reasoning…\n```json\n{"lat": 30.39, "lon": -87.68, "city": "Foley", "country": "USA"}\n```\nDone.'
    p = parse_answer(text, mode="strict", protocol="twm")
    assert (p.lat, p.lon, p.city, p.country, p.country_code) == (30.39, -87.68, "Foley", "USA", "US")
    assert p.status is ParseStatus.OK and p.format == "json" and p.coords_source == "model"


def test_twm_strict_takes_first_complete_object_and_rejects_unquoted() -> None:
    text = (
        '{"lat": 1, "lon": 2} {"lat": 3, "lon": 4, "city": "A", "country": "B"} '
        '{"lat": 5, "lon": 6, "city": "C", "country": "D"}'
    )
    p = parse_answer(text, mode="strict", protocol="twm")
    assert (p.lat, p.lon) == (3, 4)
    unquoted = '{\n "lat": 34.495,\n "lon": -85.843,\n "city": Rainsville,\n "country": United States\n}'
    assert parse_answer(unquoted, mode="strict", protocol="twm").status is ParseStatus.FAILED


def test_robust_recovers_unquoted_strings() -> None:
    unquoted = (
        'best guess\n{\n "lat": 34.495,\n "lon": -85.843,\n "city": Rainsville,\n "country": United States\n}'
    )
    p = parse_answer(unquoted)
    assert (p.lat, p.lon, p.city, p.country_code) == (34.495, -85.843, "Rainsville", "US")
    assert "tolerant_json" in p.recovered


def test_robust_last_of_several_objects_wins() -> None:
    p = parse_answer('first {"lat": 1.0, "lon": 2.0} then final {"lat": 3.5, "lon": 4.5}')
    assert (p.lat, p.lon) == (3.5, 4.5)
    assert "several_objects_last_wins" in p.recovered


def test_answer_lines_spotagent() -> None:
    text = (
        "<think>hmm</think>\n<answer>\nCountry: France\nCity: Paris\n"
        "Latitude: 48.8566\nLongitude: 2.3522\n</answer>"
    )
    for mode in ("strict", "robust"):
        p = parse_answer(text, mode=mode, protocol="spotagent" if mode == "strict" else None)  # type: ignore[arg-type]
        assert (p.lat, p.lon, p.city, p.country_code) == (48.8566, 2.3522, "Paris", "FR")
        assert p.format == "answer_lines"


def test_semicolon_answer() -> None:
    p = parse_answer("<answer>Japan; Tokyo; Shibuya Crossing</answer>")
    assert (p.country_code, p.admin1, p.poi) == ("JP", "Tokyo", "Shibuya Crossing")
    assert p.status is ParseStatus.PARTIAL and p.format == "semicolon"


def test_semicolon_answer_geocoded_when_geocoder_given() -> None:
    calls: list[tuple[str, str | None]] = []

    def geocode(query: str, country: str | None) -> tuple[float, float] | None:
        calls.append((query, country))
        return (35.6595, 139.7005)

    p = parse_answer("<answer>Japan; Tokyo; Shibuya Crossing</answer>", geocoder=geocode)
    assert (p.lat, p.lon, p.coords_source, p.status) == (35.6595, 139.7005, "geocoded", ParseStatus.OK)
    assert calls == [("Shibuya Crossing, Tokyo, Japan", "JP")]


class _FakeGazetteer:
    def search(self, query: str, country: str | None = None, limit: int = 10) -> list[Place]:
        if "springfield" in query.lower():
            return [Place(id="1", name="Springfield", lat=39.8, lon=-89.64, country_code="US")]
        return []


def test_plain_address_geocoded_through_search_interface() -> None:
    p = parse_answer("Final answer: Springfield, Illinois", geocoder=_FakeGazetteer())
    assert (p.lat, p.lon, p.coords_source) == (39.8, -89.64, "geocoded")
    assert p.address == "Springfield, Illinois"
    miss = parse_answer("Final answer: Nowhere Town", geocoder=_FakeGazetteer())
    assert miss.lat is None and miss.status is ParseStatus.PARTIAL


def test_failing_geocoder_is_not_a_crash() -> None:
    def broken(query: str, country: str | None) -> tuple[float, float] | None:
        raise RuntimeError("down")

    p = parse_answer("Berlin, Germany", geocoder=broken)
    assert p.lat is None and p.status is ParseStatus.PARTIAL


def test_impossible_geocoder_point_is_no_match() -> None:
    def nan_point(query: str, country: str | None) -> tuple[float, float] | None:
        return (float("nan"), 13.4)

    def off_globe(query: str, country: str | None) -> tuple[float, float] | None:
        return (123.0, 13.4)

    for geocoder in (nan_point, off_globe):
        p = parse_answer("Berlin, Germany", geocoder=geocoder)
        assert p.lat is None and p.status is ParseStatus.PARTIAL and "geocoded_address" not in p.recovered


def test_tool_response_never_read_as_answer() -> None:
    text = (
        '<tool_call>{"name": "static_map_query", "arguments": {"lat": 10.0, "lon": 20.0}}</tool_call>'
        '<tool_response>{"lat": 5.0, "lon": 6.0, "city": "Decoy", "country": "Chad"}</tool_response>'
        "<answer>Country: Kenya\nLatitude: -1.2921\nLongitude: 36.8219</answer>"
    )
    p = parse_answer(text)
    assert (p.lat, p.lon, p.country_code) == (-1.2921, 36.8219, "KE")
    only_tool = parse_answer('<tool_response>{"lat": 5.0, "lon": 6.0}</tool_response>')
    assert only_tool.lat is None


def test_a_tool_response_cut_off_mid_rollout_is_still_tool_output() -> None:
    own = '<answer>{"lat": 48.8566, "lon": 2.3522}</answer>'
    cut = own + '<tool_response>page text: <answer>{"lat": 0, "lon": 0}</answer> and more'
    assert (parse_answer(cut).lat, parse_answer(cut).lon) == (48.8566, 2.3522)
    assert parse_answer('<tool_response><answer>{"lat": 1, "lon": 2}</answer>').lat is None
    choices = ["France", "Chad", "Peru", "Laos"]
    quoted = "<tool_response>quiz site: the answer is B</tool_response> I looked at the sign."
    assert parse_answer(quoted, "robust", choices=choices).choice is None
    assert parse_answer(quoted + " Answer: C", "robust", choices=choices).choice == "C"


def test_last_answer_block_wins_in_robust_first_in_strict() -> None:
    text = (
        "<answer>Latitude: 1.5\nLongitude: 2.5</answer> more turns "
        "<answer>Latitude: 10.5\nLongitude: 20.5</answer>"
    )
    assert parse_answer(text).lat == 10.5
    assert parse_answer(text, mode="strict", protocol="spotagent").lat == 1.5


def test_dms_and_hemispheres() -> None:
    p = parse_answer("<answer>Latitude: 33°51′54″S\nLongitude: 151°12′36″E</answer>")
    assert p.lat == pytest.approx(-(33 + 51 / 60 + 54 / 3600))
    assert p.lon == pytest.approx(151 + 12 / 60 + 36 / 3600)
    assert "coordinate_notation" in p.recovered
    free = parse_answer("I'd say around 40.7128° N, 74.0060° W.")
    assert (free.lat, free.lon) == (pytest.approx(40.7128), pytest.approx(-74.006))


@pytest.mark.parametrize(
    ("text", "axis", "expected"),
    [
        ("48.5", "lat", 48.5),
        ("48.5 S", "lat", -48.5),
        ("W 3.25", "lon", -3.25),
        ("12°30'N", "lat", 12.5),
        ("12d30m", None, 12.5),
        ("-12°30'", None, -12.5),
        ("48,5", None, 48.5),
        ("12°75'N", "lat", None),
        ("12 E", "lat", None),
        ("north", "lat", None),
    ],
)
def test_parse_coordinate_text(text: str, axis: str | None, expected: float | None) -> None:
    got = parse_coordinate_text(text, axis)
    assert got == (pytest.approx(expected) if expected is not None else None)


def test_swapped_lat_lon_detected_only_when_impossible() -> None:
    p = parse_answer('{"coordinates": [139.69, 35.68]}')  # an unlabeled pair may be swapped
    assert (p.lat, p.lon) == (35.68, 139.69) and "swapped_lat_lon" in p.recovered
    keyed = parse_answer('{"lat": 139.69, "lon": 35.68}')  # a labeled latitude is never moved
    assert keyed.lat is None and "invalid_coordinates" in keyed.recovered
    ok = parse_answer('{"lat": 35.68, "lon": 139.69}')
    assert (ok.lat, ok.lon) == (35.68, 139.69) and "swapped_lat_lon" not in ok.recovered
    strict = parse_answer(
        '{"lat": 139.69, "lon": 35.68, "city": "x", "country": "y"}', mode="strict", protocol="twm"
    )
    assert strict.lat is None and "swapped_lat_lon" not in strict.recovered


def test_out_of_range_coordinates_rejected() -> None:
    p = parse_answer('{"lat": 95.0, "lon": 200.0, "country": "France"}')
    assert p.lat is None and p.country_code == "FR" and "invalid_coordinates" in p.recovered


def test_confidence_percent_and_fraction() -> None:
    assert parse_answer('{"lat": 1.0, "lon": 2.0, "confidence": "70%"}').confidence == pytest.approx(0.7)
    assert parse_answer('{"lat": 1.0, "lon": 2.0, "confidence": 0.4}').confidence == pytest.approx(0.4)


def test_multiple_choice_letter_and_text() -> None:
    choices = ["Germany", "France", "Spain", "Italy"]
    assert parse_answer("<answer>B</answer>", choices=choices).choice == "B"
    assert parse_answer("The answer is (c).", choices=choices).choice == "C"
    assert parse_answer("It must be Italy given the signs.", choices=choices).choice == "D"
    assert parse_answer("No idea", choices=choices).choice is None


@pytest.mark.parametrize("text", ["", "   ", None])
def test_empty_inputs(text: str | None) -> None:
    assert parse_answer(text).status is ParseStatus.EMPTY


@pytest.mark.parametrize("text", ["{{{{", "}{", '{"lat": }', "<answer>", "\x00\x01", "lat: lon:", "{" * 5000])
def test_garbage_fails_cleanly(text: str) -> None:
    p = parse_answer(text)
    assert p.lat is None
    assert p.status in (ParseStatus.FAILED, ParseStatus.PARTIAL)
    assert parse_answer(text, mode="strict", protocol="twm").lat is None


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_never_raises(text: str) -> None:
    for mode in ("robust", "strict"):
        p = parse_answer(text, mode=mode)  # type: ignore[arg-type]
        if p.lat is not None:
            assert -90 <= p.lat <= 90 and -180 <= p.lon <= 180  # type: ignore[operator]


def test_fixture_gpt5_strict_and_robust_counts() -> None:
    path = FIXTURES / "published_predictions" / "imageo2_test_gpt5.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    strict = [parse_answer(r["solution_str"], mode="strict", protocol="twm") for r in rows]
    robust = [parse_answer(r["solution_str"]) for r in rows]
    assert len(rows) == 889
    assert sum(p.has_coords for p in strict) == 835
    assert sum(p.has_coords for p in robust) == 889


def test_address_split_into_levels() -> None:
    p = parse_answer("123 Main St, Springfield, Illinois, USA")
    assert (p.street, p.city, p.admin1, p.country_code) == ("123 Main St", "Springfield", "Illinois", "US")
    assert "address_split" in p.recovered and p.status is ParseStatus.PARTIAL
    q = parse_answer("Tokyo, Japan")  # "X, Country": X may be the city or the admin-1 (issue 10)
    assert (q.city, q.admin1, q.place, q.country_code) == (None, None, "Tokyo", "JP")
    assert q.level("city") == q.level("admin1") == "Tokyo"


def test_lowercase_chatter_is_not_an_address() -> None:
    assert parse_answer("no idea, sorry").status is ParseStatus.FAILED
    assert parse_answer("東京都渋谷区").address == "東京都渋谷区"


def test_robust_mode_ignores_protocol_restrictions_and_unknown_protocol_raises() -> None:
    unquoted = '{"lat": 1.5, "lon": 2.5, "city": Foo, "country": Bar}'
    assert parse_answer(unquoted, mode="robust", protocol="twm").lat == 1.5
    assert parse_answer(unquoted, mode="strict", protocol="twm").lat is None
    with pytest.raises(ValueError, match="unknown answer protocol"):
        parse_answer("x", protocol="nope")


def test_choice_letters_need_context() -> None:
    choices = ["Niger", "Nigeria", "Chad", "Mali"]
    assert parse_answer("The answer is a country in the Sahel: Chad.", choices=choices).choice == "C"
    assert parse_answer("Definitely Nigeria.", choices=choices).choice == "B"
    assert parse_answer("Answer: (d)", choices=choices).choice == "D"
    assert parse_answer("Answer: E", choices=choices).choice is None
    assert parse_answer("Either Niger or Mali.", choices=choices).choice is None


def test_answer_lines_written_on_one_line():
    """Models often put every field of an ``<answer>`` block on one line."""
    for text in (
        "<answer>Country: France; City: Paris; Latitude: 48.85; Longitude: 2.35</answer>",
        "Country: France, City: Paris, Latitude: 48.85, Longitude: 2.35",
    ):
        p = parse_answer(text)
        assert (p.lat, p.lon, p.city, p.country_code) == (48.85, 2.35, "Paris", "FR")


@pytest.mark.parametrize(
    "text",
    ["**Final Answer:** Tokyo, Japan", "My final answer: Tokyo, Japan", "The answer is Tokyo, Japan."],
)
def test_address_answer_drops_its_lead_in(text):
    p = parse_answer(text)
    assert (p.level("city"), p.country_code, p.address) == ("Tokyo", "JP", "Tokyo, Japan")


@pytest.mark.parametrize(
    "text",
    [
        "Latitude: 48.8566 Longitude: 2.3522",
        "lat: 48.8566 lon: 2.3522",
        "Latitude: 48,8566 Longitude: 2,3522",
    ],
)
def test_one_line_keys_separated_by_a_space(text):
    p = parse_answer(text)
    assert p.status.value == "ok" and (p.lat, p.lon) == (48.8566, 2.3522)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("lat=48.85, lon=2.35", (48.85, 2.35)),
        ("<answer>Latitude = -33.87; Longitude = 151.21</answer>", (-33.87, 151.21)),
        ("latitude 48.85 longitude 2.35", (48.85, 2.35)),
        ("lat=33.87S lon=151.21E", (-33.87, 151.21)),
        ("I would say S 33.87, E 151.21.", (-33.87, 151.21)),
        ("Station N 5, E 7 platform", (None, None)),  # bare integers after letters: not a position
    ],
)
def test_keyed_and_hemisphere_first_coordinates_in_free_text(text: str, expected: tuple) -> None:
    p = parse_answer(text)
    assert (p.lat, p.lon) == expected
    if expected[0] is not None:
        assert "free_text_coordinates" in p.recovered


def test_country_codes_off_skips_only_codes_nobody_uses() -> None:
    """Scorers parse with ``country_codes=False``: same answer, no code, but geocoding keeps its hint."""
    text = '{"lat": 30.39, "lon": -87.68, "city": "Foley", "country": "USA"}'
    full = parse_answer(text, mode="strict", protocol="twm")
    light = parse_answer(text, mode="strict", protocol="twm", country_codes=False)
    assert full.country_code == "US" and light.country_code is None
    assert full.model_dump(exclude={"country_code"}) == light.model_dump(exclude={"country_code"})
    calls: list[tuple[str, str | None]] = []

    def geocode(query: str, country: str | None) -> tuple[float, float] | None:
        calls.append((query, country))
        return (35.6595, 139.7005)

    p = parse_answer("<answer>Japan; Tokyo; Shibuya Crossing</answer>", geocoder=geocode, country_codes=False)
    assert calls == [("Shibuya Crossing, Tokyo, Japan", "JP")] and p.country_code == "JP"


_WS = " \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2005\u200a\u2028\u2029\u202f\u205f\u3000aé"


def test_squeeze_knows_every_unicode_blank() -> None:
    """The fast path skips the Unicode-class scan only when no blank outside its list is present."""
    import re
    import sys

    from geosleuth.core.parsing.delimiters import _BREAK_CHARS, _ODD_BLANKS

    blanks = {chr(i) for i in range(sys.maxunicode + 1) if re.match(r"\s", chr(i))}
    assert blanks - {" ", "\n"} - set(_BREAK_CHARS) == set(_ODD_BLANKS)


@settings(max_examples=1000, deadline=None)
@given(st.text(alphabet=st.sampled_from(_WS), max_size=40))
def test_squeeze_is_the_three_step_rewrite(text: str) -> None:
    """Breaks -> \\n, then any blank run (or one odd blank) -> one space, then \\n with blanks -> \\n."""
    import re

    from geosleuth.core.parsing import squeeze

    step = re.sub(r"\r\n?|[\u2028\u2029\x85\x0b\x0c\x1c-\x1e]", "\n", text)
    step = re.sub(r"[^\S\n]{2,}|[^\S \n]", " ", step)
    assert squeeze(text) == re.sub(r" \n[ \n]*|\n[ \n]+", "\n", step)


def test_answer_field_keys_name_one_field_each() -> None:
    """Each answer key belongs to one field, so the first present key per field decides it."""
    from geosleuth.core.parsing.fields import _FIELD_KEYS

    keys = [k for ks in _FIELD_KEYS.values() for k in ks]
    assert len(keys) == len(set(keys))
    p = parse_answer('{"state": "", "province": "Bavaria", "city": "Munich"}')
    assert (p.admin1, p.city) == ("Bavaria", "Munich")  # an empty "state" gives way to "province"
    q = parse_answer('{"province": "Bavaria", "state": "Bayern", "city": "Munich"}')
    assert q.admin1 == "Bayern"


def test_every_parsed_field_reaches_the_prediction() -> None:
    """_finish passes fields by name: each answer field is a Prediction field, none is dropped."""
    from geosleuth.core.parsing.fields import _FIELD_KEYS
    from geosleuth.core.parsing.finish import _NAME_FIELDS
    from geosleuth.core.parsing.semicolon import _SEMI_LEVELS
    from geosleuth.core.records import Prediction

    assert set(_FIELD_KEYS) | set(_SEMI_LEVELS) | {"place"} == _NAME_FIELDS
    assert set(Prediction.model_fields) >= _NAME_FIELDS


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # JSON is read as written; its values are squeezed one by one
        ('{"city": "New   York", "country": "United\u00a0States", "lat": 40.7, "lon": -74.0}',
         ("United States", "New York", 40.7, -74.0, "json")),
        # a raw tab in a string is invalid JSON as written, valid once squeezed: no tolerant repair
        ('{"city": "Paris\tCentre", "lat": 48.85, "lon": 2.35}', (None, "Paris Centre", 48.85, 2.35, "json")),
        # the text formats read the region squeezed after <think> is cut out
        ("<think>maybe Rome</think>\n\nCountry:   Italy\nCity:\tMilan\nLatitude:  45.46\nLongitude: 9.19",
         ("Italy", "Milan", 45.46, 9.19, "answer_lines")),
    ],
)  # fmt: skip
def test_whitespace_is_squeezed_where_each_format_reads_it(text: str, expected: tuple[object, ...]) -> None:
    p = parse_answer(text)
    assert (p.country, p.city, p.lat, p.lon, p.format) == expected
    assert "tolerant_json" not in p.recovered


def test_parser_caches_hold_no_large_hostile_text() -> None:
    """Answers repeat schemas and names, so the parser memoises them, but only small ones: a
    hostile answer's 100 kB keys or values are handled without entering any cache."""
    from geosleuth.core.parsing import fields, prose

    key, value = "k" * 100_000, "v" * 100_000  # within the parser's 262,144-character window
    before = (fields._cached_plan.cache_info().currsize, prose._cached_clean.cache_info().currsize)
    p = parse_answer(f'{{"{key}": 1, "city": "{value}", "lat": 1.5, "lon": 2.5}}')
    assert (p.lat, p.lon, p.city) == (1.5, 2.5, None)
    after = (fields._cached_plan.cache_info().currsize, prose._cached_clean.cache_info().currsize)
    assert after == before


@pytest.mark.parametrize(
    ("text", "choice"), [("²", None), ("Answer: ³", None), ("①", None), ("٣", "C"), ("3", "C")]
)
def test_digits_int_rejects_are_no_choice_and_no_crash(text: str, choice: str | None) -> None:
    """'²' is a Unicode digit that int() rejects (found by the long adversarial run); Arabic-Indic
    '٣' is a decimal int() reads, so it picks option 3 like '3' does."""
    p = parse_answer(text, choices=["Italy", "San Marino", "Monaco", "France"])
    assert not any(r.startswith("parser_error") for r in p.recovered)
    assert p.choice == choice
