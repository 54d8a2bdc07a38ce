"""`geosleuth eval` + `report` with a scripted agent: exact numbers in summary.json and every output."""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.core.geo import haversine_km
from geosleuth.core.metrics import MAX_DISTANCE_KM

PLAN = {
    "paris": {
        "lat": 48.8566,
        "lon": 2.3522,
        "country": "France",
        "city": "Paris",
        "confidence": 0.9,
        "tools": [["zoom", True, False], ["web_search", True, True]],
    },
    "berlin": {"lat": 53.5511, "lon": 9.9937, "country": "Germany", "city": "Hamburg", "confidence": 0.6},
    "tokyo": {
        "lat": 34.6937,
        "lon": 135.5023,
        "country": "Japan",
        "confidence": 0.5,
        "tools": [["zoom", False, False]],
    },
    "nyc": {"lat": 40.73, "lon": -73.99, "country": "USA", "city": "New York", "confidence": 0.8},
    "sydney": {"raise": "endpoint down"},
    "cairo": {"lat": 48.8566, "lon": 2.3522, "country": "France", "confidence": 0.2},
    "lima": {"status": "parse_failed"},
    "delhi": {"lat": 28.6139, "lon": 77.209, "country": "India", "city": "Delhi", "confidence": 0.95},
}


@pytest.fixture()
def planned_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    data = make_csv_dataset(tmp_path / "bench")
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", PLAN)))
    config = tmp_path / "eval.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "dataset": str(data),
                "agent_fn": "eval_fake_agent:planned",
                "concurrency": 3,
                "prices": {"planned": {"prompt": 1.0, "completion": 2.0}},
                "breakdowns": ["difficulty"],
                "agent": {"search_provider": "offline", "api_key": "sk-secret-123"},
            }
        )
    )
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(app, ["eval", "--config", str(config), "--out", str(run_dir)])
    assert result.exit_code == 0, result.output
    return run_dir, json.loads((run_dir / "summary.json").read_text())


def test_summary_numbers_are_exact(planned_run: tuple[Path, dict]) -> None:
    _, summary = planned_run
    m = summary["metrics"]
    assert summary["n_samples"] == 8 and summary["n_finished"] == 8 and summary["n_failed"] == 2
    assert summary["status_counts"] == {"model_error": 1, "ok": 6, "parse_failed": 1}
    assert [m[k]["value"] for k in ("acc@1km", "acc@25km", "acc@200km", "acc@750km", "acc@2500km")] == [
        25.0,
        37.5,
        37.5,
        62.5,
        62.5,
    ]  # percent (summary.json holds accuracies in percent)
    assert summary["units"]["accuracy"] == "percent"
    assert m["acc@750km"]["n"] == 8 and m["acc@750km"]["ci95"][0] < 62.5 < m["acc@750km"]["ci95"][1]
    # city hits: paris, nyc, and "Delhi" for "New Delhi": the default protocol matches names by the
    # gazetteer's best match, and its best match for "New Delhi" is Delhi (as `geosleuth score` does)
    assert m["text_acc_country"]["value"] == 62.5 and m["text_acc_city"]["value"] == 37.5
    berlin = float(haversine_km(52.52, 13.405, 53.5511, 9.9937))
    tokyo = float(haversine_km(35.6762, 139.6503, 34.6937, 135.5023))
    assert m["median_km"] == pytest.approx((berlin + tokyo) / 2, abs=1e-5)
    d = np.array(
        [
            0,
            berlin,
            tokyo,
            haversine_km(40.7128, -74.006, 40.73, -73.99),
            MAX_DISTANCE_KM,
            haversine_km(30.0444, 31.2357, 48.8566, 2.3522),
            MAX_DISTANCE_KM,
            0.0,
        ],
        dtype=float,
    )
    assert m["mean_km"] == pytest.approx(float(d.mean()), abs=1e-4)


def test_tool_use_and_cost(planned_run: tuple[Path, dict]) -> None:
    tools = planned_run[1]["tools"]
    assert tools["tool_calls"] == 3
    assert tools["tool_success_rate"] == pytest.approx(2 / 3, abs=1e-6)
    assert tools["cache_hit_rate"] == pytest.approx(1 / 3, abs=1e-6)
    assert tools["per_tool"]["zoom"] == {
        "calls": 2,
        "calls_per_sample": 0.25,
        "success_rate": 0.5,
        "cache_hit_rate": 0.0,
        "mean_latency_s": 0.5,
    }
    assert tools["turns_per_sample"] == 1.75
    assert tools["prompt_tokens_per_sample"] == 218.75
    assert tools["cost_usd"] == pytest.approx((1750 * 1.0 + 350 * 2.0) / 1e6)


def test_breakdowns_and_calibration(planned_run: tuple[Path, dict]) -> None:
    summary = planned_run[1]
    by_difficulty = summary["breakdowns"]["difficulty"]
    assert by_difficulty["easy"]["n"] == 4 and by_difficulty["easy"]["acc@750km"] == 50.0
    assert by_difficulty["hard"]["acc@750km"] == 75.0
    continents = summary["breakdowns"]["continent"]
    assert continents["Europe"] == {**continents["Europe"], "n": 2, "acc@1km": 50.0}
    assert continents["Oceania"]["acc@2500km"] == 0.0
    calibration = summary["calibration"]
    assert calibration["n"] == 6 and calibration["spearman_confidence_vs_error"] < 0
    assert sum(b["n"] for b in calibration["bins"]) == 6


def test_outputs_and_manifest(planned_run: tuple[Path, dict]) -> None:
    run_dir, summary = planned_run
    for name in ("summary.md", "per_sample.csv", "html/index.html", "run.json", "samples.jsonl"):
        assert (run_dir / name).is_file(), name
    plots = ["accuracy_vs_threshold.png", "error_cdf.png", "continent_accuracy.png"]
    if importlib.util.find_spec("matplotlib") is None:
        assert "matplotlib is not installed" in summary["outputs"]["plots"]
    else:
        assert summary["outputs"]["plots"] == plots
        assert all((run_dir / "plots" / name).stat().st_size > 1000 for name in plots)
    assert "| acc@750km (%) | 62.50 [" in (run_dir / "summary.md").read_text()
    csv_lines = (run_dir / "per_sample.csv").read_text().splitlines()
    assert len(csv_lines) == 9 and csv_lines[0].startswith("sample_id,status")
    manifest_text = (run_dir / "run.json").read_text()
    assert "sk-secret-123" not in manifest_text and "<redacted>" in manifest_text
    manifest = json.loads(manifest_text)
    assert manifest["providers"] == ["offline"] and manifest["dataset"]["fingerprint"].startswith("sha256:")
    assert manifest["geosleuth_version"] and summary["run"]["dataset"]["n_samples"] == 8


def test_report_command_is_reproducible(planned_run: tuple[Path, dict]) -> None:
    run_dir, summary = planned_run
    result = CliRunner().invoke(app, ["report", str(run_dir), "--json", "--no-html", "--no-plots"])
    assert result.exit_code == 0, result.output
    again = json.loads(result.output)
    assert again["metrics"] == summary["metrics"] and again["tools"] == summary["tools"]


def test_a_breakdown_field_the_data_lacks_is_a_note(planned_run: tuple[Path, dict]) -> None:
    """Issue 41: ``--breakdown`` of a field no sample carries was dropped without a word."""
    run_dir, _ = planned_run
    args = ["report", str(run_dir), "--breakdown", "climate", "--breakdown", "continent", "--no-html"]
    result = CliRunner().invoke(app, [*args, "--no-plots"])
    assert result.exit_code == 0, result.output
    assert "note: --breakdown climate: no sample has a value for 'climate'" in result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "continent" in summary["breakdowns"]
    assert not any(n.startswith("--breakdown continent") for n in summary["notes"])
    assert any(n.startswith("--breakdown climate:") for n in summary["notes"])


def test_cli_errors_are_messages(tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["report", str(tmp_path)])
    assert missing.exit_code == 2 and "not a run directory" in missing.output
    bad_cfg = tmp_path / "c.yaml"
    bad_cfg.write_text("dataset: [unclosed")
    result = runner.invoke(app, ["eval", "--config", str(bad_cfg), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and "not valid YAML" in result.output
    data = make_csv_dataset(tmp_path / "b")
    table = data / "data.csv"
    table.write_text(table.read_text().replace("48.8566", "95.0"))  # a latitude out of range
    result = runner.invoke(
        app, ["eval", str(data), "--out", str(tmp_path / "r2"), "--agent-fn", "eval_fake_agent:planned"]
    )
    assert result.exit_code == 2 and "1 bad row(s)" in result.output and "--skip-invalid" in result.output
    result = runner.invoke(
        app, ["eval", str(data), "--out", str(tmp_path / "r3"), "--agent-fn", "nope:fn", "--skip-invalid"]
    )
    assert result.exit_code == 2 and "cannot import agent function" in result.output


def test_resume_with_only_the_run_directory(planned_run: tuple[Path, dict]) -> None:
    run_dir, summary = planned_run
    result = CliRunner().invoke(app, ["eval", "--resume", "--out", str(run_dir), "--no-report"])
    assert result.exit_code == 0, result.output
    assert "ran 0 sample(s)" in result.output and "8 already done" in result.output
    lines = (run_dir / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 8
    retry = CliRunner().invoke(app, ["eval", "--resume", "--out", str(run_dir), "--retry-failed"])
    assert retry.exit_code == 0, retry.output
    assert "ran 2 sample(s)" in retry.output
    assert json.loads((run_dir / "summary.json").read_text())["metrics"] == summary["metrics"]


def test_bad_agent_settings_fail_up_front(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "b")
    result = CliRunner().invoke(
        app, ["eval", str(data), "--out", str(tmp_path / "r"), "--model", "m", "--verifier", "v"]
    )
    assert result.exit_code == 2 and "a verifier needs samples >= 2" in result.output
    assert not (tmp_path / "r" / "trajectories.jsonl").exists()


def test_multiple_choice_benchmark(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from eval_data import make_image

    from geosleuth.eval.datasets.loading import load_dataset

    rows = []
    for i in range(4):
        make_image(tmp_path / "wc" / f"w{i}.jpg", i)
        rows.append(
            {
                "id": f"w{i}",
                "image": f"w{i}.jpg",
                "nation": "Kenya",
                "distractors": ["Uganda", "Chad", "Mali"],
            }
        )
    (tmp_path / "wc" / "wc.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    samples = load_dataset(tmp_path / "wc" / "wc.jsonl").samples
    right = {s.id: s.answer for s in samples}
    plan = {
        sid: {"choice": letter if sid != "w3" else ("A" if letter != "A" else "B")}
        for sid, letter in right.items()
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    result = CliRunner().invoke(
        app,
        [
            "eval",
            str(tmp_path / "wc" / "wc.jsonl"),
            "--out",
            str(tmp_path / "run"),
            "--agent-fn",
            "eval_fake_agent:planned",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["metrics"]["acc_choice"]["value"] == 75.0
    assert set(summary["metrics"]) == {"acc_choice"}  # what score reports on multiple choice
    assert (tmp_path / "run" / "html" / "index.html").is_file()


def test_reports_score_from_record_stats_and_pages_show_full_trajectories(
    planned_run: tuple[Path, dict],
) -> None:
    from geosleuth.eval.report.scores import RecordStats
    from geosleuth.eval.report.write import RunData, compute, load_run
    from geosleuth.eval.run.store import load_run_trajectories

    run_dir, _ = planned_run
    light = load_run(run_dir)
    trajectories = load_run_trajectories(run_dir)
    assert all(isinstance(r, RecordStats) for r in light.records.values())
    full = RunData(run_dir, light.manifest, {"records": trajectories})
    assert compute(light)[0]["metrics"] == compute(full)[0]["metrics"]
    assert compute(light)[0]["tools"] == compute(full)[0]["tools"]
    paris = light.records["paris"]
    assert paris.turns == 2 and paris.prediction is not None and paris.prediction.raw == ""
    assert [(c.name, c.ok, c.cache_hit) for c in paris.calls] == [
        (c.name, c.ok, c.cache_hit) for c in trajectories["paris"].tool_calls
    ]
    assert set(load_run_trajectories(run_dir, ids={"paris", "nowhere"})) == {"paris"}
    page = next((run_dir / "html" / "samples").glob("paris*.html")).read_text()
    assert "<pre>final</pre>" in page and "paris" in page.split('id="trajectory"')[1]


def test_large_runs_list_the_worst_samples_and_thin_the_map(
    planned_run: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.eval.report import html
    from geosleuth.eval.report.write import compute, load_run

    run_dir, _ = planned_run
    monkeypatch.setattr(html, "MAX_SAMPLE_PAGES", 3)
    monkeypatch.setattr(html, "MAX_MAP_POINTS", 4)
    run = load_run(run_dir)
    summary, rows = compute(run)
    index = html.write_html(tmp := run_dir / "html-capped", run, rows, summary).read_text()
    table = index.split('id="samples"')[1]
    assert table.count("<tr><td>") == 3 and "The 3 worst of 8 samples" in index
    assert len(list((tmp / "samples").glob("*.html"))) == 3
    assert index.count('class="truth"') == 4 and "One sample in 2 (4 of 8) is drawn." in index


def test_a_level_no_sample_is_labelled_with_is_a_note_not_a_zero(planned_run: tuple[Path, dict]) -> None:
    """The dataset has country and city labels but no state: `report` says so instead of 0 %."""
    run_dir, _ = planned_run
    result = CliRunner().invoke(
        app, ["report", str(run_dir), "--protocol", "geovista", "--no-html", "--no-plots"]
    )
    assert result.exit_code == 0, result.output
    summary = json.loads((run_dir / "summary.json").read_text())
    # GeoVista's figures: no state label, so acc_state is null with a note, never 0
    assert summary["metrics"]["acc_state"]["value"] is None and "acc_state" in summary["metrics"]
    assert summary["metrics"]["all_acc_city"]["value"] == 0.0  # the planned answers have no final text
    (note,) = [n for n in summary["notes"] if "released evaluation drops rows" in n]
    assert f"Note: {note}." in (run_dir / "summary.md").read_text()
    assert f"note: {note}" in result.output


def test_streamed_report_equals_figures_from_every_record(
    planned_run: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report streams (columns, on-disk lookups, top-k pages); the same figures computed the
    way it did before, from every sample and record in memory, agree one by one. A later record of
    a sample supersedes the earlier one everywhere."""
    from geosleuth.core import metrics
    from geosleuth.core.countries import country_info, resolve_country
    from geosleuth.core.records import Prediction
    from geosleuth.core.text import normalize
    from geosleuth.eval.report import html
    from geosleuth.eval.report.grounding import CachedFinder, sample_grounding
    from geosleuth.eval.report.write import compute, load_run, write_report
    from geosleuth.eval.run.pipeline import read_samples
    from geosleuth.eval.run.store import TrajectoryStore
    from geosleuth.gazetteer import get_gazetteer

    run_dir, _ = planned_run
    store = TrajectoryStore(run_dir)
    first = store.load()["paris"]
    later = first.model_copy(
        update={"prediction": Prediction(lat=45.764, lon=4.8357, city="Lyon", country="France", raw="{}")}
    )
    store.open()
    store.append([later])
    store.close()
    monkeypatch.setattr(html, "MAX_SAMPLE_PAGES", 3)
    shutil.rmtree(run_dir / "html")  # the pages eval's own report wrote
    summary = write_report(run_dir, plots=False)
    samples, records = read_samples(run_dir), TrajectoryStore(run_dir).load()  # the last record wins
    assert records["paris"].prediction.city == "Lyon"
    rows = {r.sample_id: r for r in compute(load_run(run_dir))[1]}

    # GeoComp from every record in memory
    truth: dict[str, list[str]] = {"city": [], "country": [], "continent": []}
    predicted: dict[str, list[str]] = {"city": [], "country": [], "continent": []}
    for sample in samples:
        record = records.get(sample.id)
        pred = record.prediction if record is not None and record.status == "ok" else None
        code = (pred.country_code or resolve_country(pred.country)) if pred else None
        info = country_info(code) if code else None
        row = rows[sample.id]
        values = {
            "city": (normalize(sample.labels.get("city") or ""), normalize(pred.city or "") if pred else ""),
            "country": (row.country_code or "", code or ""),
            "continent": (row.continent or "", (info.continent if info else "") or ""),
        }
        for level, (t, p) in values.items():
            if t:
                truth[level].append(t)
                predicted[level].append(p or "none")
    for level, figures in summary["grounding"]["geocomp"].items():
        recall, f1, classes = metrics.macro_recall_f1(truth[level], predicted[level])
        hits = sum(t == p for t, p in zip(truth[level], predicted[level], strict=True))
        assert figures["n"] == len(truth[level]) and figures["classes"] == classes
        assert figures["accuracy"] == pytest.approx(100 * hits / len(truth[level]), abs=1e-3)
        assert figures["macro_recall"] == pytest.approx(100 * recall, abs=1e-3)
        assert figures["macro_f1"] == pytest.approx(100 * f1, abs=1e-3)
    assert summary["grounding"]["geocomp"]["city"]["n"] > 0

    # grounding over one (the latest) record per sample
    places = CachedFinder(get_gazetteer())
    every = [sample_grounding(t, places) for t in records.values()]
    block = summary["grounding"]
    assert block["n_trajectories"] == len(records) == len(samples)
    assert block["n_claims"] == sum(len(g.checked) for g in every)
    assert block["samples_with_unsupported"] == sum(bool(g.unsupported) for g in every)

    # the pages: the worst three of a sort of every row
    ranked = sorted(
        rows.values(),
        key=lambda r: (r.status == "ok", -(r.distance_km if np.isfinite(r.distance_km) else 1e9)),
    )
    pages = {p.name for p in (run_dir / "html" / "samples").iterdir()}
    assert pages == {html._page_name(r.sample_id) for r in ranked[:3]}
