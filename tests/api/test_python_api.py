"""The flat Python API (`import geosleuth`) gives what the CLI and the engines' entry points give."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import geosleuth
from geosleuth.cli.app import app
from geosleuth.eval.datasets.loading import DatasetError
from geosleuth.scoring import ScoreInputError
from geosleuth.testing import FakeOpenAIServer, reply

ROOT = Path(__file__).resolve().parents[2]
PREDICTIONS = ROOT / "tests" / "data" / "published_predictions" / "imageo2_test_gpt5.jsonl"
sys.path.insert(0, str(ROOT / "tests" / "eval"))
from eval_data import PLACES, make_csv_dataset  # noqa: E402


def test_import_geosleuth_loads_no_other_module_and_lists_every_name() -> None:
    code = (
        "import sys, geosleuth; print(sorted(m for m in sys.modules if m.startswith('geosleuth'))); "
        "print(sorted(geosleuth.__all__) == sorted(n for n in dir(geosleuth) if n in geosleuth.__all__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["['geosleuth']", "True"]
    for name in geosleuth.__all__:
        assert getattr(geosleuth, name) is not None
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        geosleuth.nope  # noqa: B018


def test_reexports_are_the_records_and_the_tool_registry() -> None:
    from geosleuth.agent.config import AgentConfig
    from geosleuth.core.records import Prediction, Task, Trajectory
    from geosleuth.tools.base import ToolRegistry, tool

    assert (geosleuth.Task, geosleuth.Trajectory, geosleuth.Prediction) == (Task, Trajectory, Prediction)
    assert geosleuth.AgentConfig is AgentConfig and geosleuth.ToolRegistry is ToolRegistry
    assert geosleuth.tool is tool


@pytest.mark.parametrize("protocol", ["twm", "default"])
def test_score_gives_the_numbers_of_score_json(protocol: str) -> None:
    printed = CliRunner().invoke(app, ["score", str(PREDICTIONS), "--protocol", protocol, "--json"])
    assert printed.exit_code == 0, printed.output
    expected = json.loads(printed.stdout)
    result = geosleuth.score(PREDICTIONS, protocol=protocol)
    assert (result.n, result.parsed) == (expected["n"], expected["parsed"]) == (889, expected["parsed"])
    assert result.metrics == expected["metrics"] and result.ci95 == expected["ci95"]
    assert result.warnings == expected["warnings"] and result.to_dict() == expected
    assert len(result.rows) == 889 and {"id", "distance_km", "status"} <= set(result.rows[0])


def test_score_reads_records_in_memory_as_it_reads_their_file(tmp_path: Path) -> None:
    lines = PREDICTIONS.read_text(encoding="utf-8").splitlines()[:50]
    (tmp_path / "first50.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    from_file = geosleuth.score(tmp_path / "first50.jsonl", protocol="twm")
    from_records = geosleuth.score([json.loads(line) for line in lines], protocol="twm")
    assert from_records.n == 50 and from_records.metrics["acc@750km"] is not None
    assert (from_records.metrics, from_records.ci95) == (from_file.metrics, from_file.ci95)
    with pytest.raises(ScoreInputError, match="ground truth"):
        geosleuth.score([{"id": "a", "prediction": "48.85, 2.35"}])
    with pytest.raises(ValueError, match="unknown"):
        geosleuth.score(from_file.rows, protocol="nope")


def test_load_dataset_reads_a_layout_and_names_bad_rows(tmp_path: Path) -> None:
    folder = make_csv_dataset(tmp_path / "bench")
    samples = geosleuth.load_dataset(folder)
    assert [s.id for s in samples] == [p[0] for p in PLACES]
    assert samples[0].lat == pytest.approx(48.8566) and samples[0].image.endswith("paris.jpg")
    table = folder / "data.csv"
    table.write_text(table.read_text().replace("48.8566", "148.8566"))
    with pytest.raises(DatasetError, match=r"(?s)1 bad row\(s\).*row 1 \(id paris\): latitude"):
        geosleuth.load_dataset(folder)
    assert len(geosleuth.load_dataset(folder, skip_invalid=True)) == len(PLACES) - 1


def _paris(body: dict[str, Any]):  # type: ignore[no-untyped-def]
    return reply(json.dumps({"lat": 48.8566, "lon": 2.3522, "city": "Paris", "country": "France"}))


def test_evaluate_resumes_without_asking_again_for_finished_samples(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    out = tmp_path / "run"
    settings: dict[str, Any] = {"model": "fake-vlm", "out": out, "prompt": "direct", "concurrency": 2}
    with FakeOpenAIServer(_paris) as server:
        first = geosleuth.evaluate(data, base_url=server.base_url, limit=3, **settings)
        after_first = len(server.chat_requests)
        rest = geosleuth.evaluate(data, base_url=server.base_url, **settings)
        after_rest = len(server.chat_requests)
        again = geosleuth.evaluate(data, base_url=server.base_url, **settings)
        after_again = len(server.chat_requests)
    assert (after_first, after_rest, after_again) == (3, 8, 8)  # direct style: one request a sample
    assert (first.stats.done, rest.stats.skipped, rest.stats.done, again.stats.done) == (3, 3, 5, 0)
    assert first.metrics["acc@1km"] == pytest.approx(100 / 3, abs=0.01)  # paris of paris, berlin, tokyo
    assert rest.metrics["acc@1km"] == again.metrics["acc@1km"] == 12.5  # paris of the 8 places
    assert again.summary["n_samples"] == 8 and (out / "summary.json").exists()


def test_evaluate_refuses_bad_settings_before_any_request(tmp_path: Path) -> None:
    data = make_csv_dataset(tmp_path / "bench")
    with FakeOpenAIServer(_paris) as server:
        with pytest.raises(ValueError, match="prompt"):
            geosleuth.evaluate(data, model="m", base_url=server.base_url, out=tmp_path / "r", prompt="nope")
        with pytest.raises(ValueError, match="judge-model"):
            geosleuth.evaluate(data, model="m", out=tmp_path / "r", judges="levels")
        assert server.chat_requests == []


def test_score_of_records_without_truth_speaks_of_the_api() -> None:
    """Issue 41 (low): the error named a temporary file and the CLI's --truth."""
    import geosleuth
    from geosleuth.scoring import ScoreInputError

    with pytest.raises(ScoreInputError) as info:
        geosleuth.score([{"id": "a", "lat": 1.0, "lon": 2.0}])
    message = str(info.value)
    assert message.startswith("records: no row carries ground truth") and "truth=FILE" in message
    assert "--truth" not in message and "geosleuth-score-" not in message
