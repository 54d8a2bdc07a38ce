"""inspect_ai runs geosleuth's geolocation task through its own eval loop, with its mockllm model
and, from its CLI, with its own openai-api provider against a local OpenAI-compatible server.

inspect_ai pins python-dateutil < 3 (through botocore), which the shared venv cannot take, so
scripts/test.sh installs it without dependencies into .inspect-deps and these tests run inspect in
a subprocess with that folder on PYTHONPATH. The task is named as the CLI names it,
``geosleuth/geolocation``, so it is found through geosleuth's ``inspect_ai`` entry point.
"""

from __future__ import annotations

import json
import math
import subprocess
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from harness_helpers import ROOT, defined, photo_script, run_python, score_cli

from geosleuth.core.geo import distance_km
from geosleuth.testing import FakeOpenAIServer

DEPS = ROOT / ".inspect-deps"

pytestmark = [
    pytest.mark.skipif(
        not (DEPS / "inspect_ai").is_dir(),
        reason="inspect_ai not in .inspect-deps (scripts/test.sh installs it)",
    ),
    pytest.mark.skipif(
        not any(ep.name == "geosleuth" for ep in entry_points(group="inspect_ai")),
        reason="installed geosleuth metadata predates its inspect_ai entry point (pip install -e .)",
    ),
]

PARIS = '{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}'
SYDNEY = '{"lat": -33.9, "lon": 151.2, "city": "Sydney", "country": "Australia"}'


def _run(spec: dict, tmp_path: Path) -> dict:
    spec = {"log_dir": str(tmp_path / "logs"), **spec}
    done = run_python(
        ".inspect-deps", [str(Path(__file__).with_name("inspect_runner.py")), json.dumps(spec)], tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_plain_generate_scored_like_geosleuth_score(photo_dataset: Path, tmp_path: Path) -> None:
    """Three answers, the middle one unparseable: it scores wrong, the run completes, and the
    metrics are TWM's (WGS-84 geodesic, d < k) in percent with the charged median."""
    answers = [PARIS, "I cannot tell where this is, sorry.", SYDNEY]
    out = _run(
        {"task_args": {"dataset": str(photo_dataset), "protocol": "twm"}, "answers": answers}, tmp_path
    )
    assert out["status"] == "success" and out["task"] == "geosleuth/geolocation"
    by_id = {s["id"]: s for s in out["samples"]}
    assert set(by_id) == {"paris", "tokyo", "sydney"} and all(s["error"] is None for s in by_id.values())
    tokyo = by_id["tokyo"]["scores"]["protocol_scorer"]
    assert tokyo["row"]["status"] == "failed" and set(tokyo["value"].values()) == {0.0}
    d_paris = float(distance_km(48.8566, 2.3522, 48.85, 2.35, method="geodesic"))
    d_sydney = float(distance_km(-33.8688, 151.2093, -33.9, 151.2, method="geodesic"))
    assert 0.5 < d_paris < 2 and 2 < d_sydney < 10  # so the expected hits below follow by hand
    m = out["metrics"]
    assert m["acc@0.5km"] == 0.0
    assert m["acc@2km"] == pytest.approx(100 / 3, abs=0.01)
    for k in ("acc@10km", "acc@25km", "acc@200km", "acc@750km"):
        assert m[k] == pytest.approx(200 / 3, abs=0.01)
    # the unparseable answer is charged half the circumference, so the median is Sydney's error
    assert m["median_km"] == pytest.approx(d_sydney, abs=1e-3)
    assert m["mean_km"] == pytest.approx((d_paris + d_sydney + math.pi * 6371.0088) / 3, rel=1e-3)
    assert by_id["paris"]["scores"]["protocol_scorer"]["row"]["distance_km"] == pytest.approx(
        d_paris, abs=1e-6
    )


@pytest.mark.slow
def test_metrics_equal_the_score_cli(photo_dataset: Path, tmp_path: Path) -> None:
    """The default protocol's full set (levels, GeoGuessr, GeoScore) equals `geosleuth score`'s output."""
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    answers = [PARIS, "no idea", "Somewhere in Sydney, Australia"]
    out = _run({"task_args": {"dataset": str(photo_dataset)}, "answers": answers}, tmp_path)
    assert out["status"] == "success"
    preds = tmp_path / "preds.jsonl"
    ids = [s["id"] for s in out["samples"]]
    answer_of = dict(zip(["paris", "tokyo", "sydney"], answers, strict=True))
    preds.write_text("".join(json.dumps({"id": i, "response": answer_of[i]}) + "\n" for i in ids))
    cli = CliRunner().invoke(
        app, ["score", str(preds), "--truth", str(photo_dataset / "data.csv"), "--format", "json"]
    )
    assert cli.exit_code == 0, cli.output
    expected = {k: v for k, v in json.loads(cli.stdout)["metrics"].items() if v is not None}
    assert {"geoguessr", "geoscore", "acc_country", "median_km", "acc@25km"} <= set(expected)
    assert out["metrics"] == pytest.approx(expected)


def test_agent_loop_with_tools_through_inspect_model(photo_dataset: Path, tmp_path: Path) -> None:
    """tools=True: geosleuth's loop asks inspect's model, runs the zoom tool, sends its image back."""
    out = _run(
        {
            "task_args": {
                "dataset": str(photo_dataset),
                "protocol": "twm",
                "tools": True,
                "prompt": "thinking_with_map",
                "tool_names": "image_zoom_in_tool",
            },
            # tokyo: an answer without a location, then (after the loop's reminder) another one
            "agent_answers": [PARIS, "still thinking", "no idea, sorry", SYDNEY],
        },
        tmp_path,
    )
    assert out["status"] == "success", out["error"]
    assert len(out["seen"]) == 4
    for seen in out["seen"]:
        assert seen["tools"] == ["image_zoom_in_tool"]
        assert seen["tool_function"] == "image_zoom_in_tool"
        assert seen["images_after_call"] and all(
            u.startswith("data:image/") for u in seen["images_after_call"]
        )
    by_id = {s["id"]: s for s in out["samples"]}
    paris = by_id["paris"]["state"]
    assert paris["status"] == "ok" and paris["tool_calls"][0]["name"] == "image_zoom_in_tool"
    assert paris["tool_calls"][0]["ok"] is True
    assert by_id["tokyo"]["state"]["turns"] == 3  # zoom, then two answers without a location
    assert by_id["tokyo"]["state"]["status"] == "parse_failed"  # a failed trajectory answers nothing
    assert by_id["tokyo"]["scores"]["protocol_scorer"]["row"]["status"] == "empty"
    assert by_id["sydney"]["state"]["status"] == "ok"
    assert out["metrics"]["acc@25km"] == pytest.approx(200 / 3, abs=0.01)


def test_epochs_score_every_epoch(photo_dataset: Path, tmp_path: Path) -> None:
    """`--epochs 2`: each epoch's answers are one run under the protocol; figures are the mean.
    Epoch 1 gets Paris and Sydney right (2 of 3), epoch 2 only Paris (1 of 3): acc@25km = 50 %."""
    answers = {
        "0": [PARIS, PARIS],
        "40": ["no idea", "still no idea"],
        "80": [SYDNEY, "somewhere hot"],
    }
    out = _run(
        {
            "task_args": {"dataset": str(photo_dataset), "protocol": "twm"},
            "photo_answers": answers,
            "epochs": 2,
        },
        tmp_path,
    )
    assert out["status"] == "success", out["error"]
    assert out["metrics"]["acc@25km"] == pytest.approx(50.0, abs=0.01)
    assert out["metrics"]["acc@0.5km"] == 0.0
    d_sydney = float(distance_km(-33.8688, 151.2093, -33.9, 151.2, method="geodesic"))
    # epoch 1's median is Sydney's error; epoch 2's is a charged miss (half the circumference)
    half = math.pi * 6371.0088
    assert out["metrics"]["median_km"] == pytest.approx((d_sydney + half) / 2, rel=1e-3)


@pytest.mark.slow
def test_cli_resolves_the_task_and_rejects_bad_arguments(photo_dataset: Path, tmp_path: Path) -> None:
    """`inspect eval geosleuth/geolocation -T ...` finds the task through the entry point and
    passes -T arguments: a missing dataset or an unknown protocol stops before any model call,
    with the loader's or the protocol registry's message and a non-zero exit."""
    lost = tmp_path / "lost"
    lost.mkdir()
    (lost / "data.csv").write_text((photo_dataset / "data.csv").read_text().replace(".png", ".jpg"))
    data = "dataset=" + str(photo_dataset)
    mismatch = "'{}' answers in a format protocol '{}' cannot read".format
    for args, message in (
        (["-T", "dataset=" + str(tmp_path / "missing")], "dataset not found"),
        (["-T", data, "-T", "protocol=nope"], "unknown protocol 'nope'"),
        # GeoVista's <answer> lines are not TWM's JSON: every answer would score 0
        (["-T", data, "-T", "protocol=twm", "-T", "prompt=geovista"], mismatch("geovista", "twm")),
        (["-T", data, "-T", "protocol=spotagent", "-T", "prompt=direct"], mismatch("direct", "spotagent")),
        (["-T", "dataset=" + str(lost)], "none of the 3 image(s)"),
    ):  # fmt: skip
        done = run_python(
            ".inspect-deps",
            ["-m", "inspect_ai", "eval", "geosleuth/geolocation", *args, "--model", "mockllm/model",
             "--log-dir", str(tmp_path / "logs"), "--display", "plain"],
            tmp_path,
            {"COLUMNS": "1000"},  # inspect prints a prerequisite through rich: one line per message
        )  # fmt: skip
        assert done.returncode != 0
        assert message in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
        assert "Traceback" not in done.stdout + done.stderr  # issue 41: a prerequisite, told as one


def test_missing_image_is_a_wrong_answer_without_a_model_call(photo_dataset: Path, tmp_path: Path) -> None:
    """A fourth row whose photo is missing stays in the run: no model call, an empty answer,
    scored wrong (2 of 4 within 25 km); the three scripted answers go to the three photos."""
    table = photo_dataset / "data.csv"
    table.write_text(table.read_text() + "lost,lost.png,51.5074,-0.1278,United Kingdom,London\n")
    out = _run(
        {
            "task_args": {"dataset": str(photo_dataset), "protocol": "twm"},
            "answers": [PARIS, "no idea", SYDNEY],
        },
        tmp_path,
    )
    assert out["status"] == "success", out["error"]
    lost = next(s for s in out["samples"] if s["id"] == "lost")
    assert lost["state"]["status"] == "input_error: image not found"
    assert lost["scores"]["protocol_scorer"]["row"]["status"] == "empty"
    assert out["metrics"]["acc@25km"] == pytest.approx(50.0, abs=0.01)


WHERECOUNTRY = """nation,panoID,options,answer-type
Portugal,OC7wNOoNM79aK0JfB5-L5Q,"['Spain', 'Morocco', 'France']",country
Serbia,fRlOCIlcGeL75dzrP_OjMg,"['Hungary', 'Romania', 'Bulgaria']",country
"""


@pytest.mark.slow
def test_file_scoring_protocol_wherebench(tmp_path: Path) -> None:
    """A protocol that scores whole files with its own rules (WhereBench) on the released
    WhereCountry table: the right letter for Portugal, no readable letter for Serbia, which the
    released code drops (as published 100 %) and every-row accuracy counts wrong (50 %)."""
    from PIL import Image

    from geosleuth.eval.datasets.loading import load_dataset

    root = tmp_path / "wherecountry"
    (root / "imgs").mkdir(parents=True)
    (root / "wherecountry_500.csv").write_text(WHERECOUNTRY, encoding="utf-8")
    for i, pano in enumerate(("OC7wNOoNM79aK0JfB5-L5Q", "fRlOCIlcGeL75dzrP_OjMg")):
        Image.new("RGB", (32, 32), (i * 90, 10, 10)).save(root / "imgs" / f"{pano}.png")
    portugal = load_dataset(root / "wherecountry_500.csv").samples[0]  # options shuffled by seed 0
    out = _run(
        {
            "task_args": {"dataset": str(root / "wherecountry_500.csv"), "protocol": "wherebench"},
            "answers": [f"The answer is {portugal.answer}.", "I cannot decide."],
        },
        tmp_path,
    )
    assert out["status"] == "success", out["error"]
    assert out["metrics"]["acc_wherecountry_as_published"] == pytest.approx(100.0)
    assert out["metrics"]["acc_wherecountry_every_row"] == pytest.approx(50.0)
    values = {s["id"]: s["scores"]["protocol_scorer"]["value"] for s in out["samples"]}
    assert values == {"OC7wNOoNM79aK0JfB5-L5Q": {"correct": 1.0}, "fRlOCIlcGeL75dzrP_OjMg": {"correct": 0.0}}


@pytest.mark.slow
def test_inspect_cli_runs_the_task_end_to_end(photo_dataset: Path, tmp_path: Path) -> None:
    """`inspect eval geosleuth/geolocation -T dataset=… -T protocol=twm --model …` from the shell:
    the run succeeds and its log carries TWM's figures (a scripted model from a test entry point)."""
    plugin = tmp_path / "plugin" / "geosleuth_inspect_test-0.0.dist-info"
    plugin.mkdir(parents=True)
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: geosleuth-inspect-test\nVersion: 0.0\n")
    (plugin / "entry_points.txt").write_text("[inspect_ai]\ngeosleuth_inspect_test = inspect_scripted\n")
    env = {
        "GEOSLEUTH_TEST_ANSWERS": json.dumps([PARIS, "no idea", SYDNEY]),
        "PYTHONPATH_EXTRA": str(plugin.parent),
    }
    logs = tmp_path / "logs"
    args = ["-m", "inspect_ai", "eval", "geosleuth/geolocation", "-T", f"dataset={photo_dataset}"]
    args += ["-T", "protocol=twm", "--model", "geosleuth_scripted/model", "--max-samples", "1"]
    args += ["--log-dir", str(logs), "--display", "plain"]
    done = run_python(".inspect-deps", args, tmp_path, env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = logs.glob("*.eval")
    dumped = run_python(".inspect-deps", ["-m", "inspect_ai", "log", "dump", str(log)], tmp_path)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    record = json.loads(dumped.stdout)
    assert record["status"] == "success" and record["eval"]["task"] == "geosleuth/geolocation"
    figures = {k: m["value"] for s in record["results"]["scores"] for k, m in s["metrics"].items()}
    assert figures["acc@25km"] == pytest.approx(200 / 3, abs=0.01)
    assert figures["acc@2km"] == pytest.approx(100 / 3, abs=0.01)


TWM_TOOLS = [  # Thinking with Map's tools under its own names (zoom with a 0-1000 box, search, POI, maps)
    "image_zoom_tool", "web_search_tool", "poi_input_tips", "poi_keyword_search", "poi_detail_query",
    "static_map_query", "satellite_map_query",
]  # fmt: skip


def _inspect_cli(
    args: list[str], tmp_path: Path, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], dict[str, float]]:
    """`inspect eval geosleuth/geolocation ARGS` from the shell, and the figures its log holds."""
    logs = tmp_path / "logs"
    command = ["-m", "inspect_ai", "eval", "geosleuth/geolocation", *args, "--max-samples", "1"]
    done = run_python(
        ".inspect-deps", [*command, "--log-dir", str(logs), "--display", "plain"], tmp_path, env
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = logs.glob("*.eval")
    dumped = run_python(".inspect-deps", ["-m", "inspect_ai", "log", "dump", str(log)], tmp_path)
    record = json.loads(dumped.stdout)
    assert record["status"] == "success", record.get("error")
    return done, {k: m["value"] for s in record["results"]["scores"] for k, m in s["metrics"].items()}


BY_RED = {"0": PARIS, "40": "I cannot tell where this is.", "80": SYDNEY}  # the photos' red channels
BY_ID = dict(zip(["paris", "tokyo", "sydney"], BY_RED.values(), strict=True))


@pytest.mark.parametrize("tools", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_openai_api_provider_against_a_local_server(photo_dataset: Path, tmp_path: Path, tools: bool) -> None:
    """The README's local-server way: inspect's own `openai-api/<service>/<model>` provider with
    `<SERVICE>_BASE_URL` against a local OpenAI-compatible server, which answers by the photo it
    is sent. Every request is a chat completion (never /responses); the figures equal `geosleuth
    score`'s; no NaN warning. With tools and protocol twm the protocol's own style runs: Thinking
    with Map's prompt and its map tools."""
    with FakeOpenAIServer(photo_script(BY_RED)) as server:
        env = {"LOCAL_BASE_URL": server.base_url, "LOCAL_API_KEY": "unused"}
        args = ["-T", f"dataset={photo_dataset}", "-T", "protocol=twm", "-T", f"tools={str(tools).lower()}"]
        done, figures = _inspect_cli([*args, "--model", "openai-api/local/fake-vlm"], tmp_path, env)
        requests = server.requests
    # the agent loop reminds a model whose answer names no place once (Tokyo's photo): one more
    assert len(requests) == (4 if tools else 3) and {r.path for r in requests} == {"/v1/chat/completions"}
    for request in requests:
        assert request.json["model"] == "fake-vlm"
        system = request.messages[0]
        assert system["role"] == "system"
        text = system["content"] if isinstance(system["content"], str) else system["content"][0]["text"]
        assert ("map tools" in text) is tools  # Thinking with Map's prompt, not GeoVista's
        assert sorted(t["function"]["name"] for t in request.json.get("tools", [])) == (
            sorted(TWM_TOOLS) if tools else []
        )
    assert figures == pytest.approx(defined(score_cli(BY_ID, photo_dataset / "data.csv", "twm", tmp_path)))
    assert figures["acc@25km"] == pytest.approx(200 / 3, abs=0.01)
    assert "empty sample set" not in done.stdout + done.stderr


@pytest.mark.slow
def test_figures_the_data_does_not_define_are_left_out_with_a_note(tmp_path: Path) -> None:
    """A dataset without place-name labels under GeoVista's protocol, whose every answer is one its
    released code drops: each figure `geosleuth score` reports as null is absent from inspect's
    results, never 0, and the run says which and why; every other figure equals the CLI's."""
    from PIL import Image

    folder = tmp_path / "bare"
    (folder / "images").mkdir(parents=True)
    rows = ["id,image,lat,lon"]
    for i, (sid, lat, lon, _, _) in enumerate(
        [("paris", 48.8566, 2.3522, "", ""), ("tokyo", 35.6812, 139.7671, "", "")]
    ):
        Image.new("RGB", (32, 32), (40 * i, 120, 200)).save(folder / "images" / f"{sid}.png")
        rows.append(f"{sid},{sid}.png,{lat},{lon}")
    (folder / "data.csv").write_text("\n".join(rows) + "\n")
    env = {"GEOSLEUTH_TEST_ANSWERS": json.dumps(["no idea", "no idea either"])}
    plugin = tmp_path / "plugin" / "geosleuth_inspect_test-0.0.dist-info"
    plugin.mkdir(parents=True)
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: geosleuth-inspect-test\nVersion: 0.0\n")
    (plugin / "entry_points.txt").write_text("[inspect_ai]\ngeosleuth_inspect_test = inspect_scripted\n")
    args = ["-T", f"dataset={folder}", "-T", "protocol=geovista", "--model", "geosleuth_scripted/model"]
    wide = {"COLUMNS": "1000"}  # the console logs the note on one line
    done, figures = _inspect_cli(args, tmp_path, {**env, **wide, "PYTHONPATH_EXTRA": str(plugin.parent)})
    expected = score_cli(
        {"paris": "no idea", "tokyo": "no idea either"}, folder / "data.csv", "geovista", tmp_path
    )
    undefined = sorted(k for k, v in expected.items() if v is None)
    assert {"acc@3km", "median_km"} <= set(undefined)  # as published: no row kept
    assert figures == pytest.approx(defined(expected))
    assert not set(undefined) & set(figures)
    shown = done.stdout + done.stderr
    note = shown[shown.index("geosleuth: ") : shown.index("not reported")]
    assert sorted(note.removeprefix("geosleuth: ").strip().split(", ")) == undefined


@pytest.mark.slow
@pytest.mark.parametrize(
    "protocol", ["twm", "osv5m", "spotagent", "geovista", "geoclip", "g3", "pigeon", "default"]
)
def test_inspect_figures_equal_the_eval_summary(
    protocol: str, photo_dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One engine: the inspect task and `geosleuth eval` (an agent replaying the same final answers)
    report the same figures under every protocol, an unparseable answer included."""
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    answers = {"paris": PARIS, "tokyo": "I cannot tell where this is, sorry.", "sydney": SYDNEY}
    by_photo = {str(40 * i): [answers[sid]] for i, sid in enumerate(answers)}  # red channel -> answer
    spec = {"task_args": {"dataset": str(photo_dataset), "protocol": protocol}, "photo_answers": by_photo}
    out = _run(spec, tmp_path)
    assert out["status"] == "success"
    monkeypatch.syspath_prepend(str(ROOT / "tests" / "eval"))
    monkeypatch.setenv("GEOSLEUTH_TEST_ANSWERS", json.dumps(answers))
    run_dir = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        ["eval", str(photo_dataset), "--out", str(run_dir), "--agent-fn", "eval_fake_agent:replay"]
        + ["--protocol", protocol, "--no-report"],
    )
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(app, ["report", str(run_dir), "--no-html", "--no-plots"]).exit_code == 0
    summary = json.loads((run_dir / "summary.json").read_text())
    figures = {k: v["value"] if isinstance(v, dict) else v for k, v in summary["metrics"].items()}
    assert out["metrics"] == pytest.approx(defined(figures), abs=0.006)  # inspect's are rounded as score's


@pytest.mark.parametrize("tools", [False, True])
def test_a_dead_server_fails_the_run_with_or_without_tools(
    photo_dataset: Path, tmp_path: Path, tools: bool
) -> None:
    """Issue 41: with `-T tools=true` a dead server once gave every accuracy 0.000, status
    "success", exit 0 (each model failure became a wrong answer). It fails as plain generate does."""
    import socket

    with socket.socket() as probe:  # a port on 127.0.0.1 that nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"LOCAL_BASE_URL": f"http://127.0.0.1:{port}/v1", "LOCAL_API_KEY": "unused"}
    logs = tmp_path / "logs"
    args = ["-m", "inspect_ai", "eval", "geosleuth/geolocation", "-T", f"dataset={photo_dataset}",
            "-T", f"tools={str(tools).lower()}", "--model", "openai-api/local/fake-vlm", "--max-retries", "0",
            "--max-samples", "1", "--log-dir", str(logs), "--display", "plain"]  # fmt: skip
    done = run_python(".inspect-deps", args, tmp_path, env)
    (log,) = logs.glob("*.eval")
    record = json.loads(
        run_python(".inspect-deps", ["-m", "inspect_ai", "log", "dump", str(log)], tmp_path).stdout
    )
    # inspect's own CLI exits 0 for a task that ended in error (plain generate too): its log says so
    assert record["status"] == "error", (done.stdout + done.stderr)[-2000:]
    assert "APIConnectionError" in json.dumps(record.get("error")) or "failed" in json.dumps(
        record.get("error")
    )
    assert "results" not in record or not record["results"]  # no figures: no 0.000 accuracies
