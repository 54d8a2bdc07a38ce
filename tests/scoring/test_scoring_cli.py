"""`geosleuth score`: output formats, exit codes, messages (never a traceback)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from geosleuth.cli import score as score_cli

FIXTURES = Path(__file__).resolve().parents[1] / "data"  # slices of ../shared/fixtures
GPT5 = FIXTURES / "published_predictions" / "imageo2_test_gpt5.jsonl"
OSV = FIXTURES / "osv5m" / "select.csv"


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)

    @app.callback()
    def main() -> None:
        """Test harness: the score command alone."""

    score_cli.register(app)
    return app


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(_app(), ["score", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout, result.stderr


def test_twm_json_shape() -> None:
    code, out, _ = run(str(GPT5), "--protocol", "twm", "--format", "json")
    assert code == 0
    payload = json.loads(out)
    assert list(payload) == ["n", "parsed", "metrics", "ci95", "warnings"]
    assert payload["n"] == 889 and payload["parsed"] == 835
    assert payload["metrics"]["acc@0.5km"] == 11.14
    assert set(payload["ci95"]) == {"acc@0.5km", "acc@2km", "acc@10km", "acc@25km", "acc@200km", "acc@750km"}
    assert "median_km" in payload["metrics"]


def test_osv5m_rows_output(tmp_path: Path) -> None:
    rows_path = tmp_path / "rows.csv"
    code, out, _ = run(str(OSV), "-p", "osv5m", "-f", "json", "--rows", str(rows_path))
    assert code == 0
    assert json.loads(out)["metrics"]["acc_country"] == 66.0
    records = list(csv.DictReader(rows_path.open()))
    reference = list(csv.DictReader(OSV.open()))
    assert len(records) == 50
    for mine, ref in zip(records, reference, strict=True):
        assert abs(float(mine["distance_km"]) - float(ref["distance"])) < 1e-6
        assert mine["pred_country_code"] == ref["pred_country"]


def test_csv_and_table_formats_and_by() -> None:
    code, out, _ = run(str(GPT5), "-p", "twm", "-f", "csv", "--by", "data_source")
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    overall = {r["metric"]: r for r in rows if r["group"] == ""}
    assert overall["acc@0.5km"]["value"] == "11.14"
    assert {r["group"] for r in rows} == {"", "IMAGEO_2"}
    code, out, err = run(str(GPT5), "-p", "twm", "--thresholds", "1,5")
    assert code == 0 and "acc@1km" in out and "acc@5km" in out and "acc@0.5km" not in out
    assert "could not be parsed" in err


def test_several_files_in_json(tmp_path: Path) -> None:
    code, out, _ = run(str(GPT5), str(GPT5), "-p", "twm", "-f", "json")
    assert code == 0
    assert list(json.loads(out)) == ["files"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("just words\nmore words\n", "not JSON Lines"),
        ('{"id": 1, "response": "x"}\n', "no row carries ground truth"),
    ],
)
def test_fatal_input_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "in.jsonl"
    if content is not None:
        path.write_text(content)
    code, out, err = run(str(path), "-p", "twm", "-f", "json")
    assert code == 1
    assert message in err and str(path) in err
    assert "Traceback" not in out + err


def test_usage_errors() -> None:
    code, _, err = run(str(GPT5), "-p", "nope")
    assert code == 2 and "unknown protocol 'nope'" in err
    code, _, err = run(str(GPT5), "-p", "twm", "--thresholds", "fast")
    assert code == 2 and "thresholds" in err


def test_one_good_one_missing_file_still_prints_and_fails(tmp_path: Path) -> None:
    code, out, err = run(str(GPT5), str(tmp_path / "missing.jsonl"), "-p", "twm", "-f", "json")
    assert code == 1
    assert json.loads(out)["n"] == 889
    assert "missing.jsonl: no such file" in err


def test_empty_file_json(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    code, out, err = run(str(path), "-p", "twm", "-f", "json")
    payload = json.loads(out)  # the (empty) result is still printed, but an empty input is an error
    assert code == 1 and payload["n"] == 0 and payload["metrics"]["acc@0.5km"] is None
    assert "no predictions to score" in err


def test_semicolon_separated_csv_is_read(tmp_path: Path) -> None:
    path = tmp_path / "preds.csv"
    path.write_text('id;true_lat;true_lon;response\n1;48.8566;2.3522;"48.86, 2.35"\n', encoding="utf-8")
    code, out, _ = run(str(path), "--format", "json")
    payload = json.loads(out)
    assert code == 0 and (payload["n"], payload["parsed"]) == (1, 1)
    assert payload["metrics"]["acc@1km"] == 100.0


def test_score_command_loads_only_its_own_cli_module() -> None:
    """`geosleuth score` imports neither the agent/eval/training CLIs nor the gazetteer."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        f"sys.argv = ['geosleuth', 'score', {str(GPT5)!r}, '-p', 'twm', '-f', 'json']\n"
        "from geosleuth.cli.app import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "loaded = [m for m in ('geosleuth.cli.eval', 'geosleuth.cli.data', 'geosleuth.gazetteer',"
        " 'geosleuth.agent.loop') if m in sys.modules]\n"
        "print('LOADED', loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert '"acc@0.5km": 11.14' in out and "LOADED []" in out


def test_geovista_verifier_model_replaces_the_rule(tmp_path: Path) -> None:
    from geosleuth.testing import FakeOpenAIServer, reply

    truth = {
        "lat": 47.0,
        "lon": 8.3,
        "country": "Switzerland",
        "province_or_state": "Lucerne",
        "city": "Kriens",
    }
    rows = [
        {"id": 1, "ground_truth": truth, "response": "It is Kriens."},  # rule: all three right
        {"id": 2, "ground_truth": truth, "response": "Probably Bern."},  # rule: all wrong
    ]
    path = tmp_path / "gv.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    def script(body: dict) -> object:  # type: ignore[type-arg]
        prompt = body["messages"][0]["content"]
        if "Kriens." in prompt:
            return reply('{"country": true, "state": false, "city": false}')
        return reply('{"country": false, "state": true, "city": false}')

    with FakeOpenAIServer(script) as server:
        code, out, err = run(
            str(path), "-p", "geovista", "-f", "json", "--verifier-model", "judge",
            "--verifier-base-url", server.base_url,
        )  # fmt: skip
    assert code == 0, err
    m = json.loads(out)["metrics"]
    # verdicts replace the rule, then a state hit credits the country
    assert (m["acc_country"], m["acc_state"], m["acc_city"]) == (100.0, 50.0, 0.0)
    code, _, err = run(str(path), "-p", "twm", "--verifier-model", "judge")
    assert code == 2 and "applies to --protocol geovista" in err
