"""The HTML report's markup comes from autoescaped Jinja2 templates: run data never becomes markup,
the page's inline style and script match its policy's hashes, and the index is its sections in order."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path

import pytest
from eval_data import make_csv_dataset, write_plan
from typer.testing import CliRunner

from geosleuth.cli.app import app
from geosleuth.eval.report import html
from geosleuth.eval.report.markup import environment, render
from geosleuth.eval.report.write import compute, load_run

HOSTILE = "<script>alert(1)</script>"
PLACES = [(f"a{HOSTILE}", 48.8566, 2.3522, "France", "Paris"), ("b", 52.52, 13.405, "Germany", "Berlin")]


@pytest.fixture()
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    plan = {
        PLACES[0][0]: {
            "lat": 48.0,
            "lon": 2.0,
            "raw": f"answer {HOSTILE}",
            "tools": [["zoom", False, False]],
        },
        "b": {"raise": f"boom {HOSTILE}"},
    }
    monkeypatch.setenv("GEOSLEUTH_TEST_PLAN", str(write_plan(tmp_path / "plan.json", plan)))
    data = make_csv_dataset(tmp_path / "bench", PLACES)
    out = tmp_path / "run"
    argv = ["eval", str(data), "--out", str(out), "--agent-fn", "eval_fake_agent:planned", "--no-report"]
    assert CliRunner().invoke(app, argv).exit_code == 0
    return out


def test_run_data_is_escaped_everywhere(run_dir: Path) -> None:
    run = load_run(run_dir)
    summary, rows = compute(run)
    summary["run"] = {"model": HOSTILE}
    summary["metrics"][HOSTILE] = 1.0
    country = {"n": 1, "parsed": 1, "accuracy_as_published": 100.0, "accuracy_every_row": 100.0}
    summary["wherebench"] = {"wherecountry": country, "overall": 50.0}
    pages = {r.sample_id for r in rows}
    index = html.index_html(run, rows, summary, pages, [])
    sample = next(s for s in run.samples if s.id == PLACES[0][0])
    row = next(r for r in rows if r.sample_id == sample.id)
    trajectory = run.trajectories.get(sample.id)
    judged = [{"judge": HOSTILE, "ok": False, "error": HOSTILE, "result": {"why": HOSTILE}}]
    page = html.sample_html(run, sample, row, trajectory, judged)
    failed = html._failed_page(HOSTILE, ValueError(HOSTILE))
    for text in (index, page, failed):
        assert "<script>alert" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text
        assert text.count("<script>") == 1  # the page's own script, and nothing else
    assert "<h1>Evaluation: &lt;script&gt;" in index and "<title>geosleuth report: &lt;script&gt;" in index


def test_inline_style_and_script_match_the_policy(run_dir: Path) -> None:
    assert CliRunner().invoke(app, ["report", str(run_dir), "--no-plots"]).exit_code == 0
    for page in [run_dir / "html" / "index.html", *(run_dir / "html" / "samples").glob("*.html")]:
        text = page.read_text(encoding="utf-8")
        (policy,) = re.findall(r'http-equiv="Content-Security-Policy" content="([^"]*)"', text)
        assert policy == html.PAGE_CSP
        for tag, directive in (("script", "script-src"), ("style", "style-src")):
            (inline,) = re.findall(rf"<{tag}>(.*?)</{tag}>", text, re.S)
            digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
            assert f"{directive} 'sha256-{digest}'" in policy


def test_the_index_is_its_sections_in_order(run_dir: Path) -> None:
    run = load_run(run_dir)
    summary, rows = compute(run)
    summary["wherebench"] = {"overall": 50.0}
    summary["notes"] = ["metadata withheld from 2 <sample> image(s)"]
    index = html.index_html(run, rows, summary, set(), [])
    assert "<li>metadata withheld from 2 &lt;sample&gt; image(s)</li>" in index
    marks = ['id="metrics"', 'id="wherebench"', 'id="worldmap"', 'id="samples"']
    assert [index.index(m) for m in marks] == sorted(index.index(m) for m in marks)
    assert list(html.INDEX_SECTIONS) == [
        "metrics.html.j2",
        "notes.html.j2",
        "wherebench.html.j2",
        "fairness.html.j2",
        "grounding.html.j2",
        "worldmap.html.j2",
        "plots.html.j2",
        "samples.html.j2",
    ]
    without = render("wherebench.html.j2", wherebench=None) + render("plots.html.j2", plots=[])
    assert without == ""  # a section with nothing to show prints nothing


def test_every_template_is_autoescaped_and_strict() -> None:
    env = environment()
    names = env.list_templates(filter_func=lambda name: name.endswith(".j2"))
    assert set(html.INDEX_SECTIONS) <= set(names)
    for name in names:
        assert env.get_template(name).environment.autoescape is True
    with pytest.raises(Exception, match="undefined"):
        render("plots.html.j2")  # a context entry a section needs cannot be forgotten silently
