"""lmms-eval runs geosleuth's shipped tasks through its own evaluator and CLI: with a tiny simple
model, and with its built-in `openai` chat model against local OpenAI-compatible servers.

lmms-eval 0.7 pins torch 2.14 and needs filelock 3.x, which the shared venv cannot take, so
scripts/test.sh installs it without dependencies into .lmms-deps and these tests run it in a
subprocess with that folder on PYTHONPATH. The simple model is registered in lmms-eval's model
registry and reads each photo lmms-eval hands it through the task's doc_to_visual; the fake
server answers by the photo each chat request carries.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from harness_helpers import ROOT, defined, photo_script, run_python, score_cli
from typer.testing import CliRunner

from geosleuth.agent.prompting import load_style
from geosleuth.cli.app import app
from geosleuth.eval.datasets.catalog import DATASET_FORMATS
from geosleuth.integrations import lmms_eval_tasks_folder
from geosleuth.testing import FakeOpenAIServer, LlamaCppServer, llamacpp_unavailable, reply
from geosleuth.testing.llamacpp import MODEL_ALIAS, free_port

DEPS = ROOT / ".lmms-deps"
TASKS = lmms_eval_tasks_folder()

needs_lmms = pytest.mark.skipif(
    not (DEPS / "lmms_eval").is_dir(), reason="lmms-eval not in .lmms-deps (scripts/test.sh installs it)"
)

PARIS = '{"lat": 48.85, "lon": 2.35, "city": "Paris", "country": "France"}'
SYDNEY = '{"lat": -33.9, "lon": 151.2}'
ANSWERS = {"0": PARIS, "40": "I really cannot say.", "80": SYDNEY}  # by the photo's red channel
BY_ID = {"paris": PARIS, "tokyo": ANSWERS["40"], "sydney": SYDNEY}


class _Tagged(yaml.SafeLoader):
    """Reads task yamls as lmms-eval's index does: ``!function`` tags kept as plain strings."""


_Tagged.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def _yaml(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Tagged)  # noqa: S506 - SafeLoader subclass


def test_every_loader_layout_has_a_task() -> None:
    """One small yaml per format the loader reads, each naming only its format and protocol."""
    tasks = {_yaml(p)["metadata"]["format"]: _yaml(p) for p in TASKS.glob("*.yaml")}
    missing = sorted(set(DATASET_FORMATS) - set(tasks))
    assert not missing, f"add tasks/geosleuth_<format>.yaml for {missing} (copy geosleuth_generic.yaml)"
    assert "auto" in tasks
    for fmt, config in tasks.items():
        assert config["include"] == "_geosleuth_template_yaml"
        assert config["task"] == ("geosleuth" if fmt == "auto" else f"geosleuth_{fmt}")
        assert set(config) == {"include", "task", "metadata"}
    template = _yaml(TASKS / "_geosleuth_template_yaml")
    assert template["class"] == "geosleuth.integrations.lmms_eval.GeolocationTask"
    assert template["output_type"] == "generate_until"


def test_cli_prints_the_include_path() -> None:
    result = CliRunner().invoke(app, ["lmms-eval-tasks", "--list"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert Path(lines[0]) == TASKS and (TASKS / "geosleuth_im2gps3k.yaml").is_file()
    assert {"geosleuth", "geosleuth_generic", "geosleuth_osv5m"} <= set(lines[1:])


@needs_lmms
def test_lmms_eval_evaluator_scores_like_geosleuth_score(photo_dataset: Path, tmp_path: Path) -> None:
    """generic (protocol default) and mapbench (protocol twm) on the same photos: every metric
    equals `geosleuth score`'s, the unparseable answer counts as wrong, and each document's
    image reached the model (its answers are keyed by what it saw)."""
    spec = {
        "tasks": ["geosleuth_generic", "geosleuth_mapbench"],
        "include_path": str(TASKS),
        "answers": ANSWERS,
    }
    env = {"GEOSLEUTH_DATASET": str(photo_dataset)}
    done = run_python(
        ".lmms-deps", [str(Path(__file__).with_name("lmms_runner.py")), json.dumps(spec)], tmp_path, env
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    # TWM's strict parse wants lat, lon, city and country: the bare Sydney coordinates miss too
    for task, protocol, acc25 in (
        ("geosleuth_generic", "default", 200 / 3),
        ("geosleuth_mapbench", "twm", 100 / 3),
    ):
        got = {k.removesuffix(",none"): v for k, v in out["results"][task].items() if k.endswith(",none")}
        got = {k: v for k, v in got.items() if "_stderr" not in k}
        expected = defined(score_cli(BY_ID, photo_dataset / "data.csv", protocol, tmp_path))
        assert got == pytest.approx(expected), task
        assert got["acc@25km"] == pytest.approx(acc25, abs=0.01)  # "cannot say" is wrong under both
        seen = {json.loads(s["target"])["id"]: s["resps"][0][0] for s in out["samples"][task]}
        assert seen == BY_ID
    assert "geoguessr,none" in out["results"]["geosleuth_generic"]
    assert "geoguessr,none" not in out["results"]["geosleuth_mapbench"]  # TWM reports no GeoGuessr score


@needs_lmms
@pytest.mark.slow
def test_lmms_eval_cli_with_include_path_on_an_im2gps3k_folder(tmp_path: Path) -> None:
    """`lmms-eval --include_path $(geosleuth lmms-eval-tasks) --tasks geosleuth_im2gps3k` on an
    IM2GPS3K folder (im2gps3k_places365.csv, images named by IMG_ID): the model comes from a
    plugin's `lmms_eval.models` entry point, the figures from the results file lmms-eval writes.
    Run twice: under the task's protocol (default), then with GEOSLEUTH_PROTOCOL=osv5m."""
    from PIL import Image

    folder = tmp_path / "im2gps3k"
    (folder / "images").mkdir(parents=True)
    rows = ["IMG_ID,AUTHOR,LAT,LON,S3_Label,S16_Label,S365_Label,Prob_indoor,Prob_natural,Prob_urban"]
    for i, (name, lat, lon) in enumerate([("1_a.jpg", 48.8566, 2.3522), ("2_b.jpg", 35.6812, 139.7671)]):
        Image.new("RGB", (40, 30), (i * 40, 120, 200)).save(folder / "images" / name, quality=100)
        rows.append(f"{name},someone,{lat},{lon},1,2,3,0.1,0.2,0.7")
    (folder / "im2gps3k_places365.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    plugin = tmp_path / "plugin" / "geosleuth_lmms_test-0.0.dist-info"
    plugin.mkdir(parents=True)
    (plugin / "METADATA").write_text("Metadata-Version: 2.1\nName: geosleuth-lmms-test\nVersion: 0.0\n")
    (plugin / "entry_points.txt").write_text(
        "[lmms_eval.models]\ngeosleuth_pixel_reader = lmms_runner:MANIFEST\n"
    )
    include = CliRunner().invoke(app, ["lmms-eval-tasks"]).stdout.strip()
    answers = json.dumps({"0": '{"lat": 48.85, "lon": 2.35}', "40": "Tokyo, Japan"})
    got = {}
    for protocol in ("", "osv5m"):
        env = {
            "GEOSLEUTH_DATASET_IM2GPS3K": str(folder),
            "GEOSLEUTH_TEST_ANSWERS": answers,
            "GEOSLEUTH_PROTOCOL": protocol,
            "PYTHONPATH_EXTRA": str(plugin.parent),
        }
        out = tmp_path / f"out-{protocol or 'task'}"
        args = ["-m", "lmms_eval", "--model", "geosleuth_pixel_reader", "--tasks", "geosleuth_im2gps3k"]
        args += ["--include_path", include, "--batch_size", "1", "--device", "cpu", "--output_path", str(out)]
        done = run_python(".lmms-deps", args, tmp_path, env)
        assert done.returncode == 0, done.stderr[-3000:]
        assert "geosleuth_im2gps3k" in done.stdout and "acc@25km" in done.stdout  # lmms-eval's own table
        (results_file,) = out.rglob("*_results.json")
        figures = json.loads(results_file.read_text())["results"]["geosleuth_im2gps3k"]
        got[protocol or "default"] = {
            k.removesuffix(",none"): v for k, v in figures.items() if k.endswith(",none")
        }
    # default: Paris within 1 km; "Tokyo, Japan" names no coordinates, so the protocol geocodes it
    # with the gazetteer (GeoNames' Tokyo, about 7 km from this photo's point)
    assert got["default"]["acc@1km"] == pytest.approx(50.0)
    assert got["default"]["acc@2km"] == pytest.approx(50.0)
    assert got["default"]["acc@25km"] == pytest.approx(100.0)
    # osv5m geocodes nothing: the Tokyo answer has no coordinates and is wrong; its own metric set
    assert got["osv5m"]["acc@25km"] == pytest.approx(50.0)
    assert {"acc_region", "acc_area", "geoguessr"} <= set(got["osv5m"])
    assert "acc@2km" not in got["osv5m"] and "acc_region" not in got["default"]


def _lmms_cli(
    tmp_path: Path, base_url: str, model: str, tasks: str, env: dict[str, str], out: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`lmms-eval --model openai` (its built-in chat model) against ``base_url``, samples logged."""
    args = ["-m", "lmms_eval", "--model", "openai", "--tasks", tasks, "--include_path", str(TASKS)]
    args += ["--model_args", f"model={model},base_url={base_url},api_key=unused,max_retries=1,timeout=120"]
    args += ["--batch_size", "1", "--output_path", str(out or tmp_path / "out"), "--log_samples"]
    return run_python(".lmms-deps", args, tmp_path, env)


def _results(out: Path) -> dict[str, dict[str, Any]]:
    """The figures of each task in the results file lmms-eval wrote (``,none`` filter, no stderr)."""
    (results_file,) = out.rglob("*_results.json")
    return {
        task: {
            k.removesuffix(",none"): v
            for k, v in figures.items()
            if k.endswith(",none") and "_stderr" not in k
        }
        for task, figures in json.loads(results_file.read_text())["results"].items()
    }


@needs_lmms
def test_lmms_eval_cli_chat_model_against_a_local_server(photo_dataset: Path, tmp_path: Path) -> None:
    """lmms-eval's own `openai` chat model against a local OpenAI-compatible server: every request
    is a chat completion with the photo and the prompt style's text (the server answers by the
    photo it sees), and the figures in lmms-eval's results file equal `geosleuth score`'s, under
    generic (protocol default) and mapbench (protocol twm, which reads the direct style's JSON)."""
    with FakeOpenAIServer(photo_script(ANSWERS)) as server:
        done = _lmms_cli(
            tmp_path, server.base_url, "fake-vlm", "geosleuth_generic,geosleuth_mapbench",
            {"GEOSLEUTH_DATASET": str(photo_dataset)},
        )  # fmt: skip
        requests = server.requests
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert len(requests) == 6 and {r.path for r in requests} == {"/v1/chat/completions"}
    direct = load_style("direct").system.split("\n")[0]
    for request in requests:
        (user,) = request.messages
        assert user["role"] == "user" and [p["type"] for p in user["content"]] == ["image_url", "text"]
        assert user["content"][1]["text"].startswith(direct)
        assert request.json["model"] == "fake-vlm"
    got = _results(tmp_path / "out")
    for task, protocol in (("geosleuth_generic", "default"), ("geosleuth_mapbench", "twm")):
        expected = defined(score_cli(BY_ID, photo_dataset / "data.csv", protocol, tmp_path))
        assert got[task] == pytest.approx(expected), task
    assert got["geosleuth_mapbench"]["acc@25km"] == pytest.approx(100 / 3, abs=0.01)  # Paris only


@needs_lmms
@pytest.mark.slow
def test_lmms_eval_cli_refuses_what_cannot_be_scored(photo_dataset: Path, tmp_path: Path) -> None:
    """Through the lmms-eval CLI, each with a non-zero exit and no request to the model: a prompt
    style whose answer the protocol cannot read (named both), a dataset none of whose images
    exists; and, once requests are sent, a server that answers none of them."""
    lost = tmp_path / "lost"
    lost.mkdir()
    (lost / "data.csv").write_text((photo_dataset / "data.csv").read_text().replace(".png", ".jpg"))
    env = {"GEOSLEUTH_DATASET": str(photo_dataset)}
    mismatch = "'geovista' answers in a format protocol 'twm' cannot read"
    with FakeOpenAIServer(photo_script(ANSWERS)) as server:
        for extra, message in (
            ({"GEOSLEUTH_PROTOCOL": "twm", "GEOSLEUTH_PROMPT": "geovista"}, mismatch),
            ({"GEOSLEUTH_DATASET": str(lost)}, "none of the 3 image(s)"),
        ):  # fmt: skip
            done = _lmms_cli(tmp_path, server.base_url, "fake-vlm", "geosleuth_generic", {**env, **extra})
            assert done.returncode != 0, extra
            assert message in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]
        assert server.requests == []
    down = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    done = _lmms_cli(tmp_path, down, "fake-vlm", "geosleuth_generic", env)
    assert done.returncode != 0
    assert "all 3 model request(s) failed" in done.stdout + done.stderr, (done.stdout + done.stderr)[-3000:]


@needs_lmms
@pytest.mark.slow
@pytest.mark.skipif(llamacpp_unavailable() is not None, reason=str(llamacpp_unavailable()))
def test_lmms_eval_cli_chat_model_against_llama_cpp(photo_dataset: Path, tmp_path: Path) -> None:
    """The same chat model against a real OpenAI-compatible server (llama.cpp, SmolLM2-135M): every
    request is answered, and whatever the tiny model says is scored as `geosleuth score` scores it."""
    with LlamaCppServer() as server:
        done = _lmms_cli(
            tmp_path,
            server.base_url,
            MODEL_ALIAS,
            "geosleuth_generic",
            {"GEOSLEUTH_DATASET": str(photo_dataset)},
        )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (samples_file,) = (tmp_path / "out").rglob("*_samples_geosleuth_generic.jsonl")
    rows = [json.loads(line) for line in samples_file.read_text().splitlines() if line.strip()]
    answers = {  # one answer a document; lmms-eval's log keeps it as filtered_resps (a list or not)
        json.loads(r["target"])["id"]: r["filtered_resps"][0]
        if isinstance(r["filtered_resps"], list)
        else r["filtered_resps"]
        for r in rows
    }
    assert len(answers) == 3 and not any(a.startswith("[LMMS_EVAL_REQUEST_FAILED") for a in answers.values())
    expected = defined(score_cli(answers, photo_dataset / "data.csv", "default", tmp_path))
    assert _results(tmp_path / "out")["geosleuth_generic"] == pytest.approx(expected)


@needs_lmms
@pytest.mark.slow
def test_lmms_eval_reports_undefined_figures_as_null_with_a_note(photo_dataset: Path, tmp_path: Path) -> None:
    """Under GeoVista's protocol with answers its released code drops: each figure `geosleuth
    score` reports as null is null in lmms-eval's results (N/A in its table), never 0, and the run
    says which; every other figure equals the CLI's."""
    with FakeOpenAIServer(default=reply("no idea")) as server:
        env = {"GEOSLEUTH_DATASET": str(photo_dataset), "GEOSLEUTH_PROTOCOL": "geovista"}
        done = _lmms_cli(tmp_path, server.base_url, "fake-vlm", "geosleuth_generic", env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    expected = score_cli(dict.fromkeys(BY_ID, "no idea"), photo_dataset / "data.csv", "geovista", tmp_path)
    undefined = sorted(k for k, v in expected.items() if v is None)
    assert {"acc@3km", "median_km"} <= set(undefined)  # as published: no row kept
    got = _results(tmp_path / "out")["geosleuth_generic"]
    assert {k: v for k, v in got.items() if v is not None} == pytest.approx(defined(expected))
    assert sorted(k for k, v in got.items() if v is None) == undefined
    note = next(line for line in done.stderr.splitlines() if "not reported" in line)
    assert sorted(note.removeprefix("geosleuth: ").split(" not reported")[0].split(", ")) == undefined


def test_the_lmms_extra_has_what_the_readmes_qwen2_5_vl_line_needs() -> None:
    """Issue 41 (low): lmms-eval's qwen2_5_vl model imports decord, which `[lmms]` lacked."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = pyproject["project"]["optional-dependencies"]["lmms"]
    assert any(req.startswith("decord") for req in extra)
    assert "--model qwen2_5_vl" in (ROOT / "README.md").read_text(encoding="utf-8")
