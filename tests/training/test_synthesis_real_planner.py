"""``data synthesize`` with a real small planner: SmolLM2-135M on llama-cpp-python's server (127.0.0.1).

The server runs the plain ``chatml`` chat format: ``chatml-function-calling`` HTML-escapes every
message (the model reads ``{&#34;name&#34;: …}``), leaves tool turns out of the prompt and, when
tools are offered, cannot return a text answer, so a planner served that way keeps nothing
(issue 29). In text mode with the JSON-schema constraint, naming the place (``--geocode-answers``)
the planner keeps some signs. The keep filter is the usual one: every kept trajectory called a
tool validly, names the sample's country and lies within 5 km of the truth, checked again here
from the trajectory itself.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.agent import read_trajectories
from geosleuth.cli.app import app
from geosleuth.core.countries import resolve_country
from geosleuth.core.geo import haversine_km
from geosleuth.testing import LlamaCppServer, llamacpp_unavailable

REASON = llamacpp_unavailable()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(REASON is not None, reason=REASON or "")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SIGNS = ("madrid", "berlin")
"""Latin-script signs (drawn with or without the Noto fonts): at temperature 0 the planner keeps
Madrid and names New Hampshire as Berlin's country (rejected: wrong_country)."""


def sign_set() -> dict[str, object]:
    spec = importlib.util.spec_from_file_location("make_sign", EXAMPLES / "make_sign.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_sign", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return {s.name: (s, module.render_sign) for s in module.SIGN_SET}


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaCppServer]:
    with LlamaCppServer(chat_format="chatml", n_ctx=4096) as srv:
        yield srv


def make_dataset(folder: Path) -> Path:
    (folder / "images").mkdir(parents=True)
    signs = sign_set()
    with (folder / "data.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "image", "lat", "lon", "country"])
        for name in SIGNS:
            spec, render = signs[name]
            render(spec.lines, folder / "images" / f"{name}.png")  # type: ignore[operator]
            writer.writerow([name, f"images/{name}.png", spec.lat, spec.lon, spec.country_code])  # type: ignore[attr-defined]
    return folder / "data.csv"


def test_small_planner_keeps_correct_tool_using_trajectories(server: LlamaCppServer, tmp_path: Path) -> None:
    dataset = make_dataset(tmp_path / "data")
    rows = list(csv.DictReader(dataset.open()))
    truth = {row["id"]: (float(row["lat"]), float(row["lon"])) for row in rows}
    row_country = {row["id"]: row["country"] for row in rows}
    out = tmp_path / "synth"
    code = CliRunner().invoke(
        app,
        [
            "data", "synthesize", str(dataset), "--out", str(out), "--observer", "offline",
            "--planner-model", "smollm2-135m", "--planner-base-url", server.base_url,
            "--planner-tool-calling", "text", "--planner-constrained", "--temperature", "0",
            "--tools", "geocode,web_search", "--geocode-answers", "--max-steps", "3", "--max-tokens", "96",
            "--concurrency", "1",
        ],
    )  # fmt: skip
    assert code.exit_code == 0, code.output
    report = json.loads(code.output[code.output.index("{") :])
    assert report["attempted"] == len(SIGNS)
    assert "model_error" not in report["rejected"]  # every request was accepted
    assert report["kept"] > 0, json.dumps(report)
    kept = list(read_trajectories(out / "trajectories.jsonl"))
    assert report["kept"] == len(kept) > 0, report
    for traj in kept:
        calls = [c for turn in traj.turns for c in turn.tool_calls]
        assert calls and all(c.ok and c.name in {"geocode", "web_search"} for c in calls)
        lat, lon = truth[traj.sample_id]
        pred = traj.prediction
        assert pred is not None and pred.lat is not None and pred.lon is not None
        assert float(haversine_km(pred.lat, pred.lon, lat, lon)) <= 5.0
        assert resolve_country(pred.country) == resolve_country(row_country[traj.sample_id])
        assert (
            traj.messages[-1]["content"].startswith("<think>") and "<answer>{" in traj.messages[-1]["content"]
        )
        assert [m["role"] for m in traj.messages][:3] == ["system", "user", "assistant"]
        assert traj.messages[2]["tool_calls"][0]["function"]["name"] == calls[0].name
