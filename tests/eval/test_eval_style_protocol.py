"""A prompt style and a scoring protocol go together only if the protocol can read the style's
answers: `geosleuth eval` refuses the rest before the first request, naming both, and a paper's
protocol brings the paper's style when no style is given."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from geosleuth.agent.prompting import available_styles
from geosleuth.cli.app import app
from geosleuth.eval.run.styles import choose_style, reads
from geosleuth.scoring.protocols import PROTOCOLS
from geosleuth.testing import FakeOpenAIServer, reply

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_data import make_csv_dataset  # noqa: E402

ANSWER = '{"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}'

JSON = {"direct", "thinking_with_map"}  # {"lat", "lon", "city", "country"} as one JSON object
LINES = {"geovista", "spotagent"}  # Country / City / Latitude / Longitude lines inside <answer>
NAMES = {"geoagent"}  # "Country; Region; Place": names, no coordinates
READABLE = {  # by hand from each paper's released reader
    "twm": JSON,  # the first JSON object with lat, lon, city and country
    "spotagent": LINES,  # Latitude / Longitude lines of the <answer> block
    "g3": JSON | LINES,  # the first two decimal numbers
    "osv5m": JSON | LINES,  # coordinates; nothing is geocoded
    "geoclip": JSON | LINES,
    "pigeon": JSON | LINES,
    "geoestimation": JSON | LINES,  # coordinates as given, nothing geocoded
    "geovista": JSON | LINES | NAMES,  # place names are geocoded
    "default": JSON | LINES | NAMES,
    "wherebench": JSON | LINES | NAMES,  # its own rules: a choice letter, a path of levels
}
TWM_TOOLS = [  # Thinking with Map's tools (zoom with a 0-1000 box, POI search and details, maps)
    "image_zoom_in_tool", "poi_input_tips", "poi_keyword_search", "poi_detail_query",
    "static_map_query", "satellite_map_query",
]  # fmt: skip


def test_which_styles_each_protocol_reads() -> None:
    assert set(READABLE) == set(PROTOCOLS) and set(available_styles()) == JSON | LINES | NAMES
    for protocol, styles in READABLE.items():
        assert {s for s in available_styles() if reads(protocol, s)} == styles, protocol


def test_a_papers_protocol_brings_its_style() -> None:
    assert choose_style(None, "twm", tools=True) == "thinking_with_map"
    assert choose_style(None, "spotagent", tools=True) == "spotagent"
    assert choose_style(None, "spotagent", tools=False) == "spotagent"  # direct's JSON is unreadable there
    assert choose_style(None, "twm", tools=False) == "direct"
    assert choose_style(None, "osv5m", tools=True) == "geovista"
    assert choose_style("geoagent", "default", tools=False) == "geoagent"


def _eval(data: Path, out: Path, base_url: str, *extra: str):
    args = ["eval", str(data), "--out", str(out), "--model", "fake-vlm", "--base-url", base_url]
    return CliRunner().invoke(app, [*args, "--no-report", "--concurrency", "1", *extra])


@pytest.mark.parametrize(
    ("prompt", "protocol"), [("geovista", "twm"), ("direct", "spotagent"), ("geoagent", "osv5m")]
)
def test_eval_refuses_a_style_the_protocol_cannot_read(tmp_path: Path, prompt: str, protocol: str) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--prompt", prompt, "--protocol", protocol)
        requests = len(server.requests)
    assert result.exit_code == 2 and requests == 0
    assert f"prompt style {prompt!r} answers in a format protocol {protocol!r} cannot read" in result.stderr
    assert not (tmp_path / "run").exists()


def test_eval_with_protocol_twm_runs_thinking_with_map(tmp_path: Path) -> None:
    """No --prompt: TWM's protocol brings TWM's prompt, its map tools (native calls) and its JSON
    answer; the run records the style, so a resume keeps it."""
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(default=reply(ANSWER)) as server:
        result = _eval(data, tmp_path / "run", server.base_url, "--protocol", "twm", "--limit", "2")
        requests = server.chat_requests
    assert result.exit_code == 0, result.output
    assert len(requests) == 2
    for request in requests:
        assert sorted(t["function"]["name"] for t in request.json["tools"]) == sorted(TWM_TOOLS)
        assert "map tools" in request.messages[0]["content"]
    manifest = json.loads((tmp_path / "run" / "run.json").read_text())
    assert manifest["config"]["prompt"] == "thinking_with_map"
