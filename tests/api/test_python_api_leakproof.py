"""`geosleuth.evaluate` is as leak-proof as `geosleuth eval` (issue 42): pixels only, no ids in
any request, the photo's own pages dropped from the real SearXNG adapter's results, the counts in
the summary; `--manifest` as the `manifest` option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import geosleuth
from geosleuth.eval.datasets.loading import DatasetError
from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.leaky import FakeSearxng, leaked_strings, leaky_benchmark, scripted_searcher


def test_evaluate_withholds_metadata_and_guards_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeSearxng() as search, FakeOpenAIServer(scripted_searcher) as server:
        bench = leaky_benchmark(tmp_path / "bench", search.url)
        monkeypatch.setenv("GEOSLEUTH_TOOLS_CONFIG", str(bench.tools_config))
        done = geosleuth.evaluate(
            bench.folder,
            model="fake-vlm",
            base_url=server.base_url,
            out=tmp_path / "run",
            tools="image_zoom_in_tool,web_search",
            leak_guard="strict",
        )
        bodies = [r.body.decode() for r in server.chat_requests]
    assert len(bodies) == 2 and all("data:image/jpeg;base64," in b for b in bodies)
    for body in bodies:
        assert not [s for s in leaked_strings(bench) if s in body]
    assert "encyclopedia.example.com" not in bodies[1]  # strict: 48.85826, 2.29451 is 16 m off
    assert done.summary["metadata_withheld"] == 1 and done.summary["search_results_blocked"] == 3


def test_evaluate_checks_the_frozen_manifest(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    bench = leaky_benchmark(tmp_path / "bench", "http://127.0.0.1:9")
    manifest = tmp_path / "frozen.json"
    assert (
        CliRunner().invoke(app, ["datasets", "freeze", str(bench.folder), "--out", str(manifest)]).exit_code
        == 0
    )
    config = tmp_path / "eval.yaml"
    config.write_text("agent: {offline_use_ocr: false}\n")
    done = geosleuth.evaluate(bench.folder, out=tmp_path / "ok", config=config, manifest=str(manifest))
    assert done.summary["n_samples"] == 1
    run = json.loads((tmp_path / "ok" / "run.json").read_text())
    assert run["dataset"]["image_sha256"] == {
        r["id"]: r["sha256"] for r in json.loads(manifest.read_text())["samples"]
    }
    bench.image.write_bytes(bench.image.read_bytes() + b"\0")  # one byte more: another file
    with pytest.raises(DatasetError, match="1 image\\(s\\) differ from the manifest: eiffel-0042"):
        geosleuth.evaluate(bench.folder, out=tmp_path / "no", config=config, manifest=str(manifest))
