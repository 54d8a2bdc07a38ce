"""A lone surrogate (``\\ud800``, valid JSON) from a model, a tool or a file is replaced by U+FFFD
where the text enters, and the record says so: `locate --json`, `eval` (and its resume) and the
web app's job API write valid UTF-8 instead of failing (issue 32 item 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from geosleuth.core.surrogates import REPLACEMENT, clean_json
from geosleuth.testing.fake_openai import FakeOpenAIServer, Step, escaped_reply, reply, tool_call

MARK = "LONEMARK"
LONE = "\\ud800"  # as the server's JSON text carries it


def hostile(step: Step) -> Step:
    return escaped_reply(step, MARK, LONE)


def answer(city: str = "Paris", country: str = "France") -> str:
    return json.dumps({"lat": 48.8566, "lon": 2.3522, "city": city, "country": country})


CASES: dict[str, list[Step]] = {
    "content": [hostile(reply(f"Zinc roofs {MARK} and a boulangerie. {answer()}"))],
    "reasoning": [hostile(reply(answer(), reasoning=f"Haussmann facades {MARK}"))],
    "tool arguments": [
        hostile(reply(None, tool_calls=[tool_call("poi_keyword_search", {"query": f"boulangerie {MARK}"})])),
        reply(answer()),
    ],
    "answer city": [hostile(reply(answer(city=f"Par{MARK}is")))],
    "answer country": [hostile(reply(answer(country=f"Fra{MARK}nce")))],
    "answer key": [hostile(reply(answer().replace('"city"', f'"city{MARK}"')))],
}


def _utf8_json(raw: bytes) -> object:
    return json.loads(raw.decode("utf-8"))  # strict: a surrogate would not have been written


def _images(folder: Path, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, name in enumerate(names):
        path = folder / f"{i}_{name.replace(' ', '_')}.png"
        Image.new("RGB", (64, 48), (40 * i % 255, 120, 200)).save(path)
        paths.append(path)
    return paths


def test_locate_json_reports_every_image_when_replies_carry_lone_surrogates(tmp_path: Path) -> None:
    names = list(CASES)
    images = _images(tmp_path / "img", names)
    script = [step for name in names for step in CASES[name]]
    geosleuth = str(Path(sys.executable).with_name("geosleuth"))
    with FakeOpenAIServer(script) as server:
        out = subprocess.run(
            [geosleuth, "locate", *map(str, images), "--model", "fake-vlm", "--base-url", server.base_url,
             "--prompt", "thinking_with_map", "--tools", "poi_keyword_search", "--no-geocode",
             "--concurrency", "1", "--json", "--out", str(tmp_path / "run")],
            capture_output=True, timeout=120, env={**os.environ, "PYTHONIOENCODING": "utf-8"},
        )  # fmt: skip
        assert server.exhausted == 0
    assert out.returncode == 0, out.stderr.decode("utf-8", "replace")[-2000:]
    rows = _utf8_json(out.stdout)
    assert isinstance(rows, list) and [r["status"] for r in rows] == ["ok"] * len(names)
    by_case = dict(zip(names, rows, strict=True))
    assert by_case["answer city"]["prediction"]["city"] == f"Par{REPLACEMENT}is"
    assert by_case["answer country"]["prediction"]["country"] == f"Fra{REPLACEMENT}nce"
    assert by_case["tool arguments"]["tool_calls"][0]["arguments"]["query"] == f"boulangerie {REPLACEMENT}"
    assert all(r["prediction"]["lat"] == 48.8566 for r in rows)
    assert by_case["content"]["replaced_surrogates"] == {"model": 1}
    lines = (tmp_path / "run" / "trajectories.jsonl").read_bytes().splitlines()
    records = [_utf8_json(line) for line in lines]
    assert [r["metadata"]["replaced_surrogates"]["model"] for r in records] == [1, 2, 1, 1, 1, 1]
    assert "replaced 1 lone surrogate(s) in the model's reply" in out.stderr.decode()
    reasoning = records[1]["turns"][0]["reasoning"]
    assert reasoning == f"Haussmann facades {REPLACEMENT}"


def _dataset(folder: Path, n: int) -> Path:
    folder.mkdir(parents=True)
    rows = []
    for i in range(n):
        Image.new("RGB", (64, 48), (i * 30, 90, 150)).save(folder / f"s{i}.png")
        rows.append({"id": f"s{i}", "image": f"s{i}.png", "lat": 48.8566, "lon": 2.3522, "city": "Paris"})
    rows[1]["city"] = f"Par{MARK}is"  # a file's escape, too
    text = "\n".join(json.dumps(r) for r in rows).replace(MARK, LONE)
    (folder / "data.jsonl").write_text(text + "\n", encoding="utf-8")
    return folder / "data.jsonl"


@pytest.mark.slow
def test_eval_and_its_resume_record_replies_with_lone_surrogates(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    data = _dataset(tmp_path / "bench", 4)
    run = tmp_path / "run"
    common = ["--model", "fake-vlm", "--prompt", "direct", "--out", str(run), "--concurrency", "1"]
    runner = CliRunner()
    script = [reply(answer()), reply(answer()), hostile(reply(answer(city=f"Par{MARK}is"))), reply(answer())]
    with FakeOpenAIServer(script) as server:
        url = ["--base-url", server.base_url]
        first = runner.invoke(app, ["eval", str(data), *url, "--limit", "3", "--no-report", *common])
        assert first.exit_code == 0, first.output
        resumed = runner.invoke(app, ["eval", str(data), *url, "--resume", "--no-report", *common])
        assert resumed.exit_code == 0, resumed.output
        again = runner.invoke(app, ["eval", str(data), *url, "--resume", *common])  # and its report
        assert again.exit_code == 0, again.output
        asked = len(server.chat_requests)
    assert asked == 4  # three, then the fourth on resume, then nothing left to do
    records = [_utf8_json(line) for line in (run / "trajectories.jsonl").read_bytes().splitlines()]
    assert sorted(r["sample_id"] for r in records) == ["s0", "s1", "s2", "s3"]
    assert {r["status"] for r in records} == {"ok"}
    (hit,) = [r for r in records if r["prediction"]["city"] != "Paris"]
    assert hit["prediction"]["city"] == f"Par{REPLACEMENT}is"
    assert hit["metadata"]["replaced_surrogates"] == {"model": 1}
    summary = _utf8_json((run / "summary.json").read_bytes())
    assert summary["status_counts"] == {"ok": 4}  # type: ignore[index]


def test_web_app_job_with_a_lone_surrogate_reads_back(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "webapp"))
    from starlette.testclient import TestClient
    from webapp_helpers import events_of, make_settings

    from geosleuth.webapp import create_app

    script = [hostile(reply(answer(city=f"Par{MARK}is"), reasoning=f"facades {MARK}"))]
    image = tmp_path / "p.png"
    Image.new("RGB", (320, 240), (90, 120, 150)).save(image)
    with FakeOpenAIServer(script) as server:
        settings = make_settings(tmp_path, model="fake-vlm", base_url=server.base_url, prompt_style="direct")
        with TestClient(create_app(settings), base_url="http://127.0.0.1") as client:
            posted = client.post("/api/locate", files={"image": ("p.png", image.read_bytes(), "image/png")})
            assert posted.status_code == 202, posted.text
            job_id = posted.json()["id"]
            events = events_of(client, job_id)
            job = client.get(f"/api/jobs/{job_id}")
    assert events[-1]["type"] == "result"
    assert job.status_code == 200, job.text
    body = _utf8_json(job.content)
    assert REPLACEMENT in json.dumps(body, ensure_ascii=False)
    assert f"Par{REPLACEMENT}is" in job.text


def test_tool_output_with_a_lone_surrogate_is_cleaned_where_it_enters() -> None:
    import asyncio

    from geosleuth.tools.base import ToolRegistry, tool

    @tool
    def echo(text: str) -> str:
        """Echo with a lone surrogate, as a provider's JSON may carry one.

        Args:
            text: Anything.
        """
        return f"{text} \ud800 and a pair \U0001f600"

    result = asyncio.run(ToolRegistry([echo]).call("echo", {"text": "x\udc00"}))  # type: ignore[list-item]
    assert result.text.encode("utf-8")
    assert result.text.count(REPLACEMENT) == 2 and "\U0001f600" in result.text
    assert result.replaced_surrogates == 2


_LONE_CHARS = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
_TEXT = st.text(st.one_of(st.characters(blacklist_categories=("Cs",)), _LONE_CHARS), max_size=20)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | _TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_TEXT, inner, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_clean_json_leaves_only_encodable_text_and_counts_what_it_replaced(value: object) -> None:
    decoded = json.loads(json.dumps(value))  # as a reply arrives: escapes decoded, pairs joined
    expected = _count_lone(decoded)
    cleaned, replaced = clean_json(decoded)
    json.dumps(cleaned, ensure_ascii=False).encode("utf-8")  # raises on any surrogate left
    assert replaced == expected


def _count_lone(value: object) -> int:
    if isinstance(value, str):
        return sum(0xD800 <= ord(ch) <= 0xDFFF for ch in value)
    if isinstance(value, list):
        return sum(map(_count_lone, value))
    if isinstance(value, dict):
        return sum(_count_lone(k) + _count_lone(v) for k, v in value.items())
    return 0


def test_a_trajectory_file_carrying_a_lone_surrogate_escape_reads_back(tmp_path: Path) -> None:
    """A record written elsewhere with ``\\ud800`` (valid JSON that pydantic's parser refuses) is
    read with U+FFFD, counted as the file's, by the readers that resume and browse runs."""
    from geosleuth.agent.trajectory import read_trajectories
    from geosleuth.core.records import Trajectory
    from geosleuth.eval.run.store import TrajectoryStore

    line = Trajectory(sample_id="a", model="m", error=f"x{MARK}").model_dump_json().replace(MARK, LONE)
    (tmp_path / "trajectories.jsonl").write_text(line + "\n", encoding="utf-8")
    (read,) = read_trajectories(tmp_path / "trajectories.jsonl")
    stored = TrajectoryStore(tmp_path).get("a")
    for record in (read, stored):
        assert record is not None and record.error == f"x{REPLACEMENT}"
        assert record.metadata["replaced_surrogates"] == {"file": 1}
        record.model_dump_json().encode("utf-8")
    broken = line.replace('"model":"m"', '"model":')
    (tmp_path / "trajectories.jsonl").write_text(broken + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not a trajectory record"):
        list(read_trajectories(tmp_path / "trajectories.jsonl"))


@pytest.mark.skipif(sys.platform != "linux", reason="file names are bytes on Linux")
def test_locate_an_image_whose_name_is_not_utf8(tmp_path: Path) -> None:
    """Python reads the byte 0xff of a file name as the lone surrogate U+DCFF: the name enters the
    record (sample id, image reference) with U+FFFD instead, and the file is still read."""
    folder = os.fsencode(tmp_path)
    Image.new("RGB", (64, 48), (90, 120, 150)).save(tmp_path / "x.png")
    os.rename(folder + b"/x.png", folder + b"/bad\xffname.png")
    geosleuth = str(Path(sys.executable).with_name("geosleuth"))
    out = subprocess.run(
        [geosleuth.encode(), b"locate", folder + b"/bad\xffname.png", b"--no-ocr", b"--json", b"--out",
         folder + b"/run"], capture_output=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr.decode("utf-8", "replace")[-2000:]
    (row,) = _utf8_json(out.stdout)  # type: ignore[misc]
    assert row["sample_id"] == f"bad{REPLACEMENT}name" and row["status"] != "input_error"
    (line,) = (tmp_path / "run" / "trajectories.jsonl").read_bytes().splitlines()
    assert _utf8_json(line)["sample_id"] == f"bad{REPLACEMENT}name"  # type: ignore[index]


def test_score_by_a_field_carrying_a_lone_surrogate_escape(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from geosleuth.cli.app import app

    row = {"id": "a", "lat": 48.85, "lon": 2.35, "pred_lat": 48.8, "pred_lon": 2.3, "country": f"Fr{MARK}"}
    (tmp_path / "p.jsonl").write_text(json.dumps(row).replace(MARK, LONE) + "\n", encoding="utf-8")
    result = CliRunner().invoke(
        app, ["score", str(tmp_path / "p.jsonl"), "--protocol", "default", "--by", "country", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert f"Fr{REPLACEMENT}" in result.stdout and json.loads(result.stdout)
