"""`geosleuth gazetteer`: JSON out, clear errors and exit codes for bad input."""

import json

from typer.testing import CliRunner

from geosleuth.cli.app import app

runner = CliRunner()


def test_search_and_reverse_print_json():
    out = runner.invoke(app, ["gazetteer", "search", "Springfield, MA", "--limit", "1"])
    assert out.exit_code == 0
    assert json.loads(out.stdout)[0]["admin1"] == "Massachusetts"
    out = runner.invoke(app, ["gazetteer", "reverse", "--", "-33.92", "18.42"])
    assert out.exit_code == 0 and json.loads(out.stdout)["country_code"] == "ZA"


def test_bad_input_exits_non_zero_without_traceback():
    empty = runner.invoke(app, ["gazetteer", "search", "  "])
    assert empty.exit_code == 2 and "query is empty" in empty.stderr
    bad = runner.invoke(app, ["gazetteer", "reverse", "95", "0"])
    assert bad.exit_code == 2 and "Traceback" not in bad.output


def test_country_filter_resolves_codes_and_rejects_unknown_names():
    lower = runner.invoke(app, ["gazetteer", "search", "Paris", "--country", "ca", "--limit", "1"])
    assert lower.exit_code == 0 and json.loads(lower.stdout)[0]["country_code"] == "CA"
    unknown = runner.invoke(app, ["gazetteer", "search", "Paris", "--country", "Narnia"])
    assert unknown.exit_code == 2 and "unknown country 'Narnia'" in unknown.stderr


def test_reverse_takes_negative_coordinates_without_a_separator():
    out = runner.invoke(app, ["gazetteer", "reverse", "40.7128", "-74.006"])
    assert out.exit_code == 0 and json.loads(out.stdout)["country_code"] == "US"
    south = runner.invoke(app, ["gazetteer", "reverse", "-33.92", "18.42"])
    assert south.exit_code == 0 and json.loads(south.stdout)["country_code"] == "ZA"


def test_build_prints_the_index_and_says_what_became_of_the_postcode_index(monkeypatch):
    """`geosleuth gazetteer build` (README, docs/architecture.md): the gazetteer's folder on stdout;
    on stderr the postcode index beside it with its counts, or that the extra is not installed."""
    import importlib.util
    from pathlib import Path

    from geosleuth.gazetteer import postcodes

    out = runner.invoke(app, ["gazetteer", "build"])
    assert out.exit_code == 0 and Path(out.stdout.strip()).is_dir()
    if importlib.util.find_spec("countrystatecity_postal_codes") is not None:
        built = next(line for line in out.stderr.splitlines() if line.startswith("postcode index: "))
        path = built.removeprefix("postcode index: ").split(" (")[0]
        assert Path(path).parent == Path(out.stdout.strip()) and "postcode centroids" in built
    monkeypatch.setattr(postcodes, "package_version", lambda: None)
    monkeypatch.setattr(postcodes, "_indexes", {})
    absent = runner.invoke(app, ["gazetteer", "build"])
    assert absent.exit_code == 0
    assert "postcode index: not built (countrystatecity-postal-codes is not installed" in absent.stderr
