"""Leak-proof benchmark runs through `geosleuth eval` (issue 42): pixels only, no ids, the search
leak guard with the real SearXNG adapter on 127.0.0.1, and the counts in summary.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.leaky import (
    HONEST_URL,
    FakeSearxng,
    LeakyBenchmark,
    assert_clean_requests,
    leaky_benchmark,
    scripted_searcher,
)


def _eval(bench: LeakyBenchmark, out: Path, server: FakeOpenAIServer, *flags: str) -> CliRunner:
    return CliRunner().invoke(
        app,
        ["eval", str(bench.folder), "--out", str(out), "--model", "fake-vlm", "--base-url", server.base_url,
         "--tools", "image_zoom_in_tool,web_search,exif_gps", *flags],
    )  # fmt: skip


@pytest.mark.parametrize(("mode", "blocked"), [("hosts", 2), ("strict", 3)])
def test_eval_drops_the_photos_own_pages_and_sends_no_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, blocked: int
) -> None:
    with FakeSearxng() as search, FakeOpenAIServer(scripted_searcher) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(bench.tools_config))
        result = _eval(bench, tmp_path / "run", server, "--leak-guard", mode)
        bodies = [r.body.decode() for r in server.chat_requests]
    assert result.exit_code == 0, result.output
    assert search.queries == ["green bench lamp post"]  # the model's query, nothing of the sample
    assert_clean_requests(bodies, bench)
    assert HONEST_URL in bodies[1]
    # hosts keeps the encyclopedia page (48.85826, 2.29451: about 16 m from the truth); strict drops it
    assert ("encyclopedia.example.com" in bodies[1]) == (mode == "hosts")
    record = json.loads((tmp_path / "run" / "trajectories.jsonl").read_text())
    assert record["metadata"]["search_results_blocked"] == blocked
    assert "flickr" not in json.dumps(record["turns"])  # the verifier and judges read these records
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["search_results_blocked"] == blocked and summary["metadata_withheld"] == 1
    assert any("metadata withheld: 1 of 1" in n for n in summary["notes"])
    assert any(f"leak guard {mode}: {blocked} search / POI result(s) dropped" in n for n in summary["notes"])
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["dataset"]["image_metadata"] == {"eiffel-0042": ["caption", "comment", "gps"]}
    assert "flickr.com" not in manifest["dataset"]["source_hosts"]  # a generic table names no source
    assert "metadata withheld" in (tmp_path / "run" / "summary.md").read_text()


def test_the_exif_tool_sees_no_metadata_in_a_benchmark_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from geosleuth.testing import reply, tool_call

    steps = [
        reply(tool_calls=[tool_call("exif_gps", {})]),
        reply("<answer>\nLatitude: 1\nLongitude: 2\n</answer>"),
    ]
    with FakeSearxng() as search, FakeOpenAIServer(steps) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(bench.tools_config))
        result = _eval(bench, tmp_path / "run", server)
        bodies = [r.body.decode() for r in server.chat_requests]
    assert result.exit_code == 0, result.output
    assert_clean_requests(bodies, bench)
    assert "no EXIF metadata" in bodies[1]


def test_leak_hosts_from_the_config_and_guard_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSearxng() as search, FakeOpenAIServer(scripted_searcher) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(bench.tools_config))
        config = tmp_path / "eval.yaml"
        config.write_text("leak_hosts: [example.org]\n")
        hosts = _eval(bench, tmp_path / "hosts", server, "--config", str(config))
        off = _eval(bench, tmp_path / "off", server, "--leak-guard", "off")
    assert hosts.exit_code == 0 and off.exit_code == 0, hosts.output + off.output
    with_hosts = json.loads((tmp_path / "hosts" / "summary.json").read_text())
    assert with_hosts["search_results_blocked"] == 3  # flickr, the file name, and the user's example.org
    unguarded = json.loads((tmp_path / "off" / "summary.json").read_text())
    assert unguarded["search_results_blocked"] is None
    assert any("leak guard off" in n for n in unguarded["notes"])


def test_offline_pipeline_no_longer_answers_from_exif(tmp_path: Path) -> None:
    bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
    config = tmp_path / "eval.yaml"
    config.write_text("agent: {offline_use_ocr: false}\n")
    runner = CliRunner()
    guarded = runner.invoke(
        app, ["eval", str(bench.folder), "--out", str(tmp_path / "a"), "--config", str(config)]
    )
    allowed = runner.invoke(
        app,
        [
            "eval",
            str(bench.folder),
            "--out",
            str(tmp_path / "b"),
            "--config",
            str(config),
            "--allow-metadata",
        ],
    )
    assert guarded.exit_code == 0 and allowed.exit_code == 0, guarded.output + allowed.output
    record = json.loads((tmp_path / "a" / "trajectories.jsonl").read_text())
    assert record["prediction"] is None and "exif" not in json.dumps(record["turns"]).lower()
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["metadata_withheld"] == 1 and summary["metrics"]["acc@1km"]["value"] == 0.0
    exif = json.loads((tmp_path / "b" / "trajectories.jsonl").read_text())
    assert exif["prediction"]["coords_source"] == "exif"
    opened = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert opened["metadata_withheld"] == 0 and opened["metrics"]["acc@1km"]["value"] == 100.0
    assert any("--allow-metadata" in n for n in opened["notes"])


def test_the_verifier_reads_the_filtered_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeSearxng() as search, FakeOpenAIServer(scripted_searcher) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(bench.tools_config))
        result = _eval(bench, tmp_path / "run", server, "--samples", "2", "--verifier", "fake-vlm")
        bodies = [r.body.decode() for r in server.chat_requests]
    assert result.exit_code == 0, result.output
    assert len(bodies) == 5  # two samples of two turns each, then the verifier
    assert HONEST_URL in bodies[-1] and "img.example.net" not in bodies[-1]  # it saw what the samples saw
    assert_clean_requests(bodies, bench)
    record = json.loads((tmp_path / "run" / "trajectories.jsonl").read_text())
    assert record["metadata"]["search_results_blocked"] == 4  # two per sample
