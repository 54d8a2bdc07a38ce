"""A third-party package extends every registry without any file of geosleuth edited.

The test writes a small package (``geo_ext``) that adds one protocol, one dataset format, one
prompt style, one tool, one reward and one judge, each through its entry-point group, installs
it with pip into a folder of its own, and runs geosleuth's doors in subprocesses that see that
folder: ``--help``, ``score``, ``eval`` (with the judge), ``locate`` (style + tool against the
fake OpenAI server), ``geosleuth.reward`` and, slow, ``inspect eval``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from PIL import Image

from geosleuth.testing import FakeOpenAIServer
from geosleuth.testing.fake_openai import reply, tool_call

ROOT = Path(__file__).resolve().parents[1]

PLUGIN = '''
"""geo_ext: one entry for each geosleuth registry."""

from pathlib import Path

import numpy as np

from geosleuth.core.records import Sample
from geosleuth.eval.judges.tasks import Judgment, JudgeTask, answer_text
from geosleuth.scoring.protocols import ScoringProtocol
from geosleuth.tools.base import tool
from geosleuth.training.rewards.registry import RewardDef
from geosleuth.training.rewards.scorers import read_coordinates
from geosleuth.training.rewards.rollouts import RewardBatch

PROTOCOL = ScoringProtocol(
    name="within",
    description="share of answers within 3 and 30 km (d <= k), haversine R = 6371 km",
    radius_km=6371.0,
    thresholds=(3.0, 30.0),
    strict_threshold=False,
    median_mean=False,
)


def pipe_row(row, index, resolver):
    """Rows whose ``where`` column is ``lat|lon``."""
    lat, lon = (float(v) for v in row["where"].split("|"))
    return Sample(id=str(row["key"]), image=resolver.resolve(row["photo"], str(row["key"])), lat=lat, lon=lon)


STYLE = Path(__file__).with_name("terse.yaml")


@tool
def elevation(lat: float, lon: float) -> str:
    """Ground elevation at a point, in metres.

    Args:
        lat: latitude
        lon: longitude
    """
    return f"elevation at {lat:.2f},{lon:.2f}: 436 m"


def _near(params, batch):
    d, parsed, preds = read_coordinates(batch, 6371.0)
    scores = np.where(np.isnan(d), 0.0, (d <= params["km"]).astype(float))
    return RewardBatch(scores, d, parsed, list(preds))


NEAR = RewardDef(
    name="near", summary="1 within km, else 0", paper="geo_ext", params={"km": 100.0}, score_paper=_near
)


async def _brevity(sample, trajectory, ask, protocol):
    answer = answer_text(trajectory)
    raw, cached = await ask(f"Is this answer brief? {answer}")
    brief = raw.strip().lower().startswith("yes")
    return Judgment(sample.id, "brevity", True, {"brief": brief}, None, [raw], cached)


BREVITY = JudgeTask("brevity", _brevity, lambda sample: True)
'''

STYLE = """
description: answer with one JSON object
tools: [elevation]
tool_calling: native
max_turns: 3
protocol: twm
answer_example: '{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}'
system: You locate photos. Finish with one JSON object with lat, lon, city and country.
user: Where was this photo taken?
"""

ENTRY_POINTS = """
[geosleuth.protocols]
within = "geo_ext:PROTOCOL"
[geosleuth.formats]
pipe = "geo_ext:pipe_row"
[geosleuth.prompt_styles]
terse = "geo_ext:STYLE"
[geosleuth.tools]
elevation = "geo_ext:elevation"
[geosleuth.rewards]
near = "geo_ext:NEAR"
[geosleuth.judges]
brevity = "geo_ext:BREVITY"
"""


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``geo_ext`` built and installed by pip (setuptools, no index) into a folder of its own."""
    src = tmp_path_factory.mktemp("geo_ext_src")
    (src / "geo_ext").mkdir()
    (src / "geo_ext" / "__init__.py").write_text(PLUGIN, encoding="utf-8")
    (src / "geo_ext" / "terse.yaml").write_text(STYLE, encoding="utf-8")
    groups = "".join(
        f'\n[project.entry-points."{line[1:-1]}"]\n' if line.startswith("[") else line + "\n"
        for line in ENTRY_POINTS.strip().splitlines()
    )
    (src / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [build-system]
            requires = ["setuptools>=61"]
            build-backend = "setuptools.build_meta"

            [project]
            name = "geo-ext"
            version = "0.1"

            [tool.setuptools]
            packages = ["geo_ext"]

            [tool.setuptools.package-data]
            geo_ext = ["*.yaml"]
            """
        )
        + groups,
        encoding="utf-8",
    )
    site = tmp_path_factory.mktemp("geo_ext_site")
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run([*pip, "--target", str(site), str(src)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"pip could not build the plugin here: {done.stderr[-500:]}")
    return site


def _run(site: Path, args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    environ.update(env)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=environ, timeout=600
    )


def _cli(site: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return _run(site, ["-m", "geosleuth", *args], cwd, COLUMNS="400", **env)


def test_every_entry_appears_in_the_help(plugin_site: Path, tmp_path: Path) -> None:
    def help_of(*command: str) -> str:
        done = _cli(plugin_site, tmp_path, *command, "--help")
        assert done.returncode == 0, done.stderr[-2000:]
        return " ".join(done.stdout.split())

    assert "within" in help_of("score")
    eval_help = help_of("eval")
    assert all(name in eval_help for name in ("pipe", "terse", "brevity"))
    locate_help = help_of("locate")
    assert "elevation" in locate_help and "terse" in locate_help
    assert "near" in help_of("data", "export-verl")


def test_score_with_the_plugin_protocol(plugin_site: Path, tmp_path: Path) -> None:
    """Four answers 1, 10, 100 km north of the truth and one unanswered, d <= 3 / 30 km:
    acc@3km = 1/4 = 25 %, acc@30km = 2/4 = 50 % (1 km of latitude = 1 / 111.195 degrees)."""
    rows = tmp_path / "preds.jsonl"
    truth = {"lat": 45.0, "lon": 7.0}
    with rows.open("w", encoding="utf-8") as out:
        for i, km in enumerate((1.0, 10.0, 100.0)):
            guess = {"lat": 45.0 + km / 111.195, "lon": 7.0}
            out.write(json.dumps({"id": f"s{i}", "prediction": guess, "ground_truth": truth}) + "\n")
        out.write(json.dumps({"id": "s3", "response": "I cannot tell.", "ground_truth": truth}) + "\n")
    done = _cli(plugin_site, tmp_path, "score", str(rows), "--protocol", "within", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    metrics = json.loads(done.stdout)["metrics"]
    assert metrics["acc@3km"] == pytest.approx(25.0) and metrics["acc@30km"] == pytest.approx(50.0)
    spec = _cli(plugin_site, tmp_path, "score", str(rows), "--protocol", "geo_ext:PROTOCOL", "--json")
    assert spec.returncode == 0 and json.loads(spec.stdout)["metrics"] == metrics


def _pipe_dataset(root: Path) -> Path:
    folder = root / "pipe_data"
    folder.mkdir()
    lines = ["key,photo,where"]
    for key, lat, lon in (("luz", 47.05, 8.31), ("ber", 46.95, 7.45)):
        Image.new("RGB", (32, 24), (90, 120, 200)).save(folder / f"{key}.png")
        lines.append(f"{key},{key}.png,{lat}|{lon}")
    (folder / "table.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "table.csv"


def test_a_format_named_by_its_path(plugin_site: Path, tmp_path: Path) -> None:
    """`--format package.module:adapter` reads a dataset as the registered name does."""
    table = _pipe_dataset(tmp_path)
    for fmt in ("pipe", "geo_ext:pipe_row"):
        done = _cli(plugin_site, tmp_path, "datasets", "validate", str(table), "--format", fmt, "--json")
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads(done.stdout)
        assert report["valid_samples"] == 2 and report["problems"] == [], report
    wrong = _cli(plugin_site, tmp_path, "datasets", "validate", str(table), "--format", "geo_ext:NEAR")
    assert wrong.returncode != 0 and "row adapter" in wrong.stderr


def test_eval_with_the_plugin_format_protocol_and_judge(plugin_site: Path, tmp_path: Path) -> None:
    """`eval --format pipe --protocol within --judges brevity`: the agent answers Luzern for both
    photos, so Luzern is right (0 km) and Bern 81 km off: acc@3km = acc@30km = 50 %."""
    table = _pipe_dataset(tmp_path)
    plan = tmp_path / "plan.json"
    raw = '{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}'
    luzern = {"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland", "raw": raw}
    plan.write_text(json.dumps({"luz": luzern, "ber": luzern}), encoding="utf-8")
    with FakeOpenAIServer(default=reply("yes, brief")) as judge:
        done = _cli(
            plugin_site, tmp_path, "eval", str(table), "--format", "pipe", "--protocol", "within",
            "--agent-fn", "eval_fake_agent:planned", "--out", str(tmp_path / "run"),
            "--judges", "brevity", "--judge-model", "fake-vlm", "--judge-base-url", judge.base_url,
            PYTHONPATH=os.pathsep.join([str(plugin_site), str(ROOT / "tests" / "eval")]),
            GEOSLEUTH_TEST_PLAN=str(plan),
        )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text(encoding="utf-8"))
    figures = summary["metrics"]
    assert figures["acc@3km"]["value"] == pytest.approx(50.0)
    assert figures["acc@30km"]["value"] == pytest.approx(50.0)
    judgments = [json.loads(line) for line in (tmp_path / "run" / "judgments.jsonl").read_text().splitlines()]
    assert {(j["sample_id"], j["judge"], j["result"]["brief"]) for j in judgments} == {
        ("luz", "brevity", True),
        ("ber", "brevity", True),
    }


def test_locate_offers_the_plugin_tool_in_the_plugin_style(plugin_site: Path, tmp_path: Path) -> None:
    image = tmp_path / "photo.png"
    Image.new("RGB", (64, 48), (10, 120, 60)).save(image)
    answer = '{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}'
    script = [
        reply(tool_calls=[tool_call("elevation", {"lat": 47.05, "lon": 8.31})]),
        reply(answer),
    ]
    with FakeOpenAIServer(script) as server:
        done = _cli(
            plugin_site, tmp_path, "locate", str(image), "--model", "fake-vlm", "--base-url", server.base_url,
            "--prompt", "terse", "--json", OPENAI_API_KEY="sk-test",
        )  # fmt: skip
        requests = server.chat_requests
    assert done.returncode == 0, done.stderr[-3000:]
    offered = [t["function"]["name"] for t in requests[0].json["tools"]]
    assert offered == ["elevation"]
    followup = json.dumps(requests[1].messages)
    assert "elevation at 47.05,8.31: 436 m" in followup
    result = json.loads(done.stdout)
    record = result[0] if isinstance(result, list) else result
    assert record["prediction"]["city"] == "Luzern"


def test_the_reward_api_takes_the_plugin_reward(plugin_site: Path, tmp_path: Path) -> None:
    """`near` (km = 100): 50 km off scores 1, 150 km off 0, and km=200 makes both 1."""
    code = textwrap.dedent(
        """
        import json, geosleuth
        truth = {"lat": 45.0, "lon": 7.0}
        texts = ['{"lat": %f, "lon": 7.0}' % (45 + km / 111.195) for km in (50, 150)]
        print(json.dumps([geosleuth.reward("near").batch(texts, [truth, truth]),
                          geosleuth.reward("near", km=200).batch(texts, [truth, truth])]))
        """
    )
    done = _run(plugin_site, ["-c", code], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout) == [[1.0, 0.0], [1.0, 1.0]]


@pytest.mark.slow
def test_inspect_task_scores_with_the_plugin_protocol(plugin_site: Path, tmp_path: Path) -> None:
    """`inspect eval geosleuth/geolocation -T format=pipe -T protocol=within` through inspect's own
    CLI, with the scripted model of the harness tests answering Luzern for both photos: Luzern
    right (0 km), Bern 81 km off, so acc@3km = acc@30km = 1 of 2."""
    deps = ROOT / ".inspect-deps"
    if not (deps / "inspect_ai").is_dir():
        pytest.skip("inspect_ai not in .inspect-deps (scripts/test.sh installs it)")
    scripted = tmp_path / "scripted" / "geosleuth_inspect_test-0.0.dist-info"
    scripted.mkdir(parents=True)
    (scripted / "METADATA").write_text("Metadata-Version: 2.1\nName: geosleuth-inspect-test\nVersion: 0.0\n")
    (scripted / "entry_points.txt").write_text("[inspect_ai]\ngeosleuth_inspect_test = inspect_scripted\n")
    table = _pipe_dataset(tmp_path)
    logs = tmp_path / "logs"
    args = ["-m", "inspect_ai", "eval", "geosleuth/geolocation", "-T", f"dataset={table}"]
    args += ["-T", "format=pipe", "-T", "protocol=within", "--model", "geosleuth_scripted/model"]
    args += ["--max-samples", "1"]
    args += ["--log-dir", str(logs), "--display", "plain"]
    luzern = '{"lat": 47.05, "lon": 8.31, "city": "Luzern", "country": "Switzerland"}'
    paths = [plugin_site, scripted.parent, deps, ROOT / "tests" / "integrations"]
    env = {
        "PYTHONPATH": os.pathsep.join([*map(str, paths), os.environ.get("PYTHONPATH", "")]),
        "GEOSLEUTH_TEST_ANSWERS": json.dumps([luzern, luzern]),
        "INSPECT_LOG_LEVEL": "warning",
    }
    done = _run(plugin_site, args, tmp_path, **env)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (log,) = logs.glob("*.eval")
    dumped = _run(plugin_site, ["-m", "inspect_ai", "log", "dump", str(log)], tmp_path, **env)
    record = json.loads(dumped.stdout)
    assert record["status"] == "success", json.dumps(record.get("error"))[-3000:]
    figures = {k: m["value"] for s in record["results"]["scores"] for k, m in s["metrics"].items()}
    assert figures["acc@3km"] == pytest.approx(50.0) and figures["acc@30km"] == pytest.approx(50.0)
